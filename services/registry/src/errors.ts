import { HttpError } from '@paygate/http';
import type { RegistryReason } from './reasons';

/** A refusal answered to a caller, naming the rule it applies (and the field, when one is to blame). */
export const refusal = (
  status: number,
  code: RegistryReason,
  message: string,
  rule: string,
  field?: string,
) => new HttpError(status, code, message, field === undefined ? { rule } : { field, rule });

/**
 * The registry's errors below the HTTP layer: one base, `RegistryError`, and a named subclass per situation.
 * Refusals answered to a caller are `HttpError`s (libs/http) with a code of reasons.ts.
 */
export class RegistryError extends Error {
  override name = 'RegistryError';
}

/** A skill row the transaction had just updated was not there to read back: a broken invariant, never a refusal. */
export class SkillVanishedError extends RegistryError {
  override name = 'SkillVanishedError';
  constructor(readonly skillId: string) {
    super(`skill ${skillId} vanished inside its transaction`);
  }
}
