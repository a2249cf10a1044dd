/**
 * `fleet pins`, `fleet pins approve <tool>` and `fleet pins forget <tool>`: the
 * policy-validator's tool pins (`--policy`,
 * else `FLEET_POLICY_URL`, else the URL a running `fleet up` wrote to `<state dir>/fleet.json`,
 * else http://127.0.0.1:8082), with `FLEET_TOKEN` (else the running fleet's) when set.
 */
import type { Command } from 'commander';
import { type CommandContext, stateDirOption } from '../context.ts';
import { CliError } from '../errors.ts';
import {
  type PinsView,
  type PolicyClient,
  SHORT_DIGEST_LENGTH,
  shortDigest,
} from '../policy-client.ts';
import { formatTable } from '../table.ts';
import { formatTime } from './audit-stats.ts';

const FULL_DIGEST = /^[0-9a-f]{64}$/;
const DIGEST_PREFIX = new RegExp(`^[0-9a-f]{${SHORT_DIGEST_LENGTH},64}$`);

/**
 * `fleet pins` for people: drifted tools first, marked, then the pinned ones; digests
 * shortened; the approve command of each drift. `hint` writes a `fleet ...` command line.
 */
export function formatPins(view: PinsView, hint: (words: string) => string): string {
  const { enabled, pins, drifts } = view;
  const lines: string[] = [];
  if (!enabled)
    lines.push(
      'pinning is off: the policy-validator neither pins nor checks tool definitions',
      `  turn it on: add "pinning: {enabled: true}" to its policy file (POLICY_FILE; ${hint('up')} runs packages/cli/demo-config/policy.yaml unless POLICY_FILE names another); the service reloads the file`,
    );
  if (pins.length === 0 && drifts.length === 0) {
    if (enabled)
      lines.push(
        'pinning is on; no tool pinned yet (a tool is pinned the first time it is listed)',
      );
    return `${lines.join('\n')}\n`;
  }
  const drifted = new Set(drifts.map((d) => d.tool));
  const pinnedOnly = pins.filter((p) => !drifted.has(p.tool));
  if (!enabled) lines.push('', 'stored from when it was on (not checked while off):');
  else
    lines.push(
      drifts.length === 0
        ? `${pins.length} tool${pins.length === 1 ? '' : 's'} pinned, none drifted`
        : `${drifts.length} of ${pinnedOnly.length + drifts.length} tools DRIFTED: hidden from tools/list and refused until approved`,
    );
  const table = formatTable(
    ['', 'TOOL', 'STATUS', 'PINNED', 'SEEN', 'SINCE'],
    [
      ...drifts.map((d) => [
        '!',
        d.tool,
        'DRIFTED',
        shortDigest(d.pinned),
        shortDigest(d.seen),
        formatTime(d.firstSeen),
      ]),
      ...pinnedOnly.map((p) => [
        '',
        p.tool,
        'pinned',
        shortDigest(p.digest),
        '-',
        formatTime(p.pinnedAt),
      ]),
    ],
  );
  const approve = drifts.map(
    (d) => `  ${hint(`pins approve ${d.tool} --digest ${shortDigest(d.seen)}`)}`,
  );
  const next =
    approve.length === 0
      ? []
      : [
          'review each new definition, then approve it (--digest: the SEEN you reviewed):',
          ...approve,
        ];
  return `${lines.join('\n')}\n${table}${next.map((line) => `${line}\n`).join('')}`;
}

/**
 * The full seen digest `digest` names for `tool`: a full one as it is, a prefix (at least
 * {@link SHORT_DIGEST_LENGTH} hex digits, as `fleet pins` shows them) completed from the
 * tool's drift. Lower-cases it. @throws {CliError} `USAGE`, `NO_DRIFT` or `PIN_CONFLICT`.
 */
async function seenDigest(api: PolicyClient, tool: string, digest: string): Promise<string> {
  const wanted = digest.toLowerCase();
  if (!DIGEST_PREFIX.test(wanted))
    throw new CliError(
      'USAGE',
      `--digest must be the SEEN digest fleet pins shows (${SHORT_DIGEST_LENGTH} to 64 hex digits), got "${digest}"`,
    );
  if (FULL_DIGEST.test(wanted)) return wanted;
  const drift = (await api.pins()).drifts.find((d) => d.tool === tool);
  if (!drift) throw api.noDrift(tool);
  if (!drift.seen.startsWith(wanted))
    throw new CliError(
      'PIN_CONFLICT',
      `tool "${tool}" changed again since ${wanted} was reviewed (now ${shortDigest(drift.seen)}): nothing approved; review its new definition and approve that one`,
      { details: { reviewed: wanted, seen: drift.seen } },
    );
  return drift.seen;
}

/** Add `pins`, `pins approve` and `pins forget` to `program`. */
export function addPinsCommand(program: Command, context: CommandContext): Command {
  const pins = program
    .command('pins')
    .description(
      "the policy-validator's tool pins: drifted tools (a definition changed since it was pinned) first",
    )
    .option(
      '--policy <url>',
      'policy-validator base URL (default: $FLEET_POLICY_URL, else the running fleet of --state-dir, else http://127.0.0.1:8082)',
    )
    .addOption(stateDirOption())
    .addHelpText(
      'after',
      "\nSends FLEET_TOKEN (else the running fleet's token) as a bearer token. Digests are shortened\nto 12 hex digits; --json prints the service's answer with full digests.",
    )
    .action(async (_options: unknown, command: Command) => {
      const view = await context.policy(command).pins();
      context.print(command, view, () => formatPins(view, (words) => context.hint(command, words)));
    });
  pins
    .command('approve')
    .description(
      'pin the definition a drifted tool shows now (its SEEN digest): it is listed and callable again',
    )
    .argument('<tool>', 'the tool, as fleet pins shows it')
    .option(
      '--digest <seen>',
      'the SEEN digest you reviewed (12 to 64 hex digits): refused if the tool changed again since',
    )
    .configureHelp({ showGlobalOptions: true })
    .action(async (tool: string, options: { digest?: string }, command: Command) => {
      // --policy and --state-dir are options of `pins`: its hints name them.
      const parent = command.parent ?? command;
      if (tool.trim() === '')
        throw new CliError(
          'USAGE',
          `the tool name is empty (${context.hint(parent, 'pins')} lists the drifted tools)`,
        );
      const api = context.policy(parent);
      const digest =
        options.digest === undefined ? undefined : await seenDigest(api, tool, options.digest);
      const pin = await api.approve(tool, digest);
      context.print(
        command,
        pin,
        () =>
          `approved ${pin.tool}: pinned ${shortDigest(pin.digest)} at ${formatTime(pin.pinnedAt)}; it is listed and callable again\n  sha256 ${pin.digest}\n`,
      );
    });
  pins
    .command('forget')
    .description(
      "remove a tool's pin, and its drift if any: the next tools/list that shows the tool pins the definition it shows then, unreviewed",
    )
    .argument('<tool>', 'the tool, as fleet pins shows it')
    .addHelpText(
      'after',
      '\nFor a tool its backend no longer lists, or to make room in a full pin store\n(PINNING_MAX_TOOLS). Forgetting a drifted tool trusts whatever it shows next: to\naccept a definition you reviewed, use fleet pins approve <tool> --digest <seen>.',
    )
    .configureHelp({ showGlobalOptions: true })
    .action(async (tool: string, _options: unknown, command: Command) => {
      const parent = command.parent ?? command;
      if (tool.trim() === '')
        throw new CliError(
          'USAGE',
          `the tool name is empty (${context.hint(parent, 'pins')} lists the pinned tools)`,
        );
      await context.policy(parent).forget(tool);
      context.print(
        command,
        { tool, forgotten: true },
        () =>
          `forgot the pin of ${tool}: the next tools/list that shows it pins its definition afresh\n`,
      );
    });
  return pins;
}
