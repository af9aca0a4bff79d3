/** Inbox prefix of a NATS user: its request replies and pull deliveries arrive under it, and nobody else may read it. */
export function inboxPrefixFor(user: string): string {
  return `_INBOX.${user}`;
}
