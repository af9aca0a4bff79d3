/**
 * Rules every accepted JSON value meets before its schema, as Postgres and JSON cannot carry them faithfully:
 * no NUL, no unpaired surrogate, no number beyond 2^53 − 1, and a bounded depth.
 */
export const MAX_JSON_DEPTH = 32;

export const STORED_TEXT_RULES = {
  nul: 'must not contain NUL (\\u0000)',
  surrogate: 'must be well-formed Unicode (no unpaired surrogate)',
  number: `must be at most ${Number.MAX_SAFE_INTEGER} in size (exact in JSON)`,
  depth: `must nest at most ${MAX_JSON_DEPTH} levels`,
} as const;

// Node 20 has String.prototype.isWellFormed; the lib typings of the project may predate it.
const isWellFormed = (text: string) => (text as unknown as { isWellFormed(): boolean }).isWellFormed();

function textRule(text: string): string | undefined {
  if (text.includes('\u0000')) return STORED_TEXT_RULES.nul;
  if (!isWellFormed(text)) return STORED_TEXT_RULES.surrogate;
  return undefined;
}

/** The first break of the rules above as a dotted field and its rule; iterative, so depth cannot overflow. */
export function findStoredTextViolation(
  value: unknown,
  root: string,
): { field: string; rule: string } | undefined {
  const stack: Array<{ value: unknown; path: string[] }> = [{ value, path: [] }];
  const fieldOf = (path: string[]) => path.join('.') || root;
  while (stack.length > 0) {
    const { value: current, path } = stack.pop()!;
    if (typeof current === 'string') {
      const rule = textRule(current);
      if (rule) return { field: fieldOf(path), rule };
    } else if (typeof current === 'number') {
      if (Math.abs(current) > Number.MAX_SAFE_INTEGER)
        return { field: fieldOf(path), rule: STORED_TEXT_RULES.number };
    } else if (current !== null && typeof current === 'object') {
      if (path.length >= MAX_JSON_DEPTH) return { field: fieldOf(path), rule: STORED_TEXT_RULES.depth };
      for (const [key, child] of Object.entries(current)) {
        const childPath = [...path, key];
        const keyRule = textRule(key);
        if (keyRule) return { field: fieldOf(childPath), rule: `name ${keyRule}` };
        stack.push({ value: child, path: childPath });
      }
    }
  }
  return undefined;
}
