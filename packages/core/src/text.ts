/** Client-chosen text as an error message or a log line quotes it. */

/**
 * `text` as quoted: itself when at most `max` characters, else its first `max` characters
 * and how long it was (`abc… (1048576 characters)`): a made-up name or reason can be as long
 * as the request body.
 */
export function quoteCut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}
