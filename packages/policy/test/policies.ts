/** Policy documents shared by the tests. */

/** The example of issue #5, verbatim. */
export const ISSUE_POLICY = `version: 1
default: deny                 # allow | deny
rules:
  - id: read-only-for-guests
    effect: deny
    events: ["tools/call"]    # exact, "*" or "tools/*" globs
    tools: ["*delete*", "fs_write_*"]   # globs on tool/prompt/resource name
    when: 'principal.type == "anonymous" || !("admin" in principal.claims.roles)'
    message: "Only admins may delete"
  - id: big-transfers
    effect: deny
    tools: ["bank_transfer"]
    when: 'arguments.amount > 10000'
  - id: allow-rest
    effect: allow
    events: ["*"]
rateLimits:
  - id: per-user-calls
    events: ["tools/call"]
    key: principal.id
    limit: 100
    window: 60s
`;

/** The issue example's intent written in Cedar (`engine: cedar`). */
export const CEDAR_POLICY = `version: 1
engine: cedar
default: deny
cedar:
  policies: |
    @id("users-and-services")
    permit(principal, action, resource)
      unless { principal is Anonymous };

    @id("guests-read")
    permit(principal is Anonymous, action == Action::"tools/call", resource)
      when { resource.name like "read_*" };

    @id("read-only-for-guests")
    @message("Only admins may delete")
    forbid(principal, action == Action::"tools/call", resource is Tool)
      when { resource.name like "*delete*" }
      unless { context.claims has roles && context.claims.roles.contains("admin") };

    @id("big-transfers")
    forbid(principal, action, resource == Tool::"bank_transfer")
      when { context.arguments has amount && context.arguments.amount > 10000 };

    @id("no-secrets")
    forbid(principal, action == Action::"resources/read", resource)
      when { resource.name like "secret://*" };
`;
