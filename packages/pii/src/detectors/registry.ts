/** The default recognizer set, in a fixed order (the result never depends on it). */
import { assignmentRecognizer } from './assignment.ts';
import { creditCardRecognizer } from './credit-card.ts';
import { cryptoWalletRecognizer } from './crypto-wallet.ts';
import { dateOfBirthRecognizer } from './date-of-birth.ts';
import { emailRecognizer } from './email.ts';
import { ibanRecognizer } from './iban.ts';
import { ipRecognizer } from './ip.ts';
import { jwtRecognizer } from './jwt.ts';
import { macRecognizer } from './mac.ts';
import { personRecognizer } from './person.ts';
import { phoneRecognizer } from './phone.ts';
import { privateKeyRecognizer } from './private-key.ts';
import type { Recognizer } from './recognizer.ts';
import { awsSecretKeyRecognizer, bearerRecognizer, tokenFormatsRecognizer } from './secrets.ts';
import { urlCredentialsRecognizer } from './url-credentials.ts';
import { usSsnRecognizer } from './us-ssn.ts';

/** Every built-in recognizer. */
export const DEFAULT_RECOGNIZERS: readonly Recognizer[] = [
  emailRecognizer,
  phoneRecognizer,
  creditCardRecognizer,
  ibanRecognizer,
  usSsnRecognizer,
  ipRecognizer,
  macRecognizer,
  urlCredentialsRecognizer,
  tokenFormatsRecognizer,
  awsSecretKeyRecognizer,
  bearerRecognizer,
  jwtRecognizer,
  privateKeyRecognizer,
  assignmentRecognizer,
  cryptoWalletRecognizer,
  dateOfBirthRecognizer,
  personRecognizer,
];
