import type { HttpError } from '@paygate/http';
import type { Transaction, Updateable } from 'kysely';
import type { RegistryDatabase, SkillStatus, SkillsTable } from '../db';
import { refusal } from '../errors';
import { RegistryReason } from '../reasons';

/** The skill state machine: ask `skillTransition` first (an illegal move is a 409), write with `applySkillTransition`. */
export type SkillEvent =
  | 'validation_passed'
  | 'validation_failed'
  /** The seller asks for validation again (POST …/validate). */
  | 'retry_validation'
  /** The seller changed fields that do not decide where paid traffic goes (names, type, SKILL.md…). */
  | 'edited'
  | 'endpoints_changed'
  /** apiBaseUrl changed: where paid traffic goes. */
  | 'base_url_changed'
  | 'archive'
  /** Operators suspend (policy violation) and lift the suspension. */
  | 'suspend'
  | 'unsuspend';

/**
 * What a transition writes besides the status (`applySkillTransition`); `revalidate` starts a new validation
 * sequence, so a run in flight is discarded.
 */
export type SkillEffect = 'none' | 'set_status' | 'revalidate' | 'recheck_health';

export interface SkillTransition {
  from: SkillStatus;
  event: SkillEvent;
  to: SkillStatus;
  effect: SkillEffect;
}

type Moves = Partial<Record<SkillStatus, readonly [SkillStatus, SkillEffect]>>;

const skillArchived = () =>
  refusal(
    409,
    RegistryReason.SkillArchived,
    'the skill is archived; archived skills cannot be changed',
    'an archived skill cannot be changed',
  );

const notPending = (from: SkillStatus) =>
  invalidState(`a validation result applies to a PENDING_VALIDATION skill (status is ${from})`);

/** Sellers edit a skill in every status but ARCHIVED; a suspended skill is not validated until it is lifted. */
const editable: Moves = {
  PENDING_VALIDATION: ['PENDING_VALIDATION', 'none'],
  ACTIVE: ['ACTIVE', 'none'],
  VALIDATION_FAILED: ['VALIDATION_FAILED', 'none'],
  SUSPENDED: ['SUSPENDED', 'none'],
};
/** An edit of what is served: a skill not yet live is validated again. */
const servedEdit: Moves = {
  ...editable,
  PENDING_VALIDATION: ['PENDING_VALIDATION', 'revalidate'],
  VALIDATION_FAILED: ['PENDING_VALIDATION', 'revalidate'],
};

const MACHINE: Record<SkillEvent, { moves: Moves; refusal: (from: SkillStatus) => HttpError }> = {
  validation_passed: { moves: { PENDING_VALIDATION: ['ACTIVE', 'set_status'] }, refusal: notPending },
  validation_failed: {
    moves: { PENDING_VALIDATION: ['VALIDATION_FAILED', 'set_status'] },
    refusal: notPending,
  },
  retry_validation: {
    moves: {
      VALIDATION_FAILED: ['PENDING_VALIDATION', 'revalidate'],
      PENDING_VALIDATION: ['PENDING_VALIDATION', 'none'],
    },
    refusal: (from) =>
      invalidState(`only a skill in VALIDATION_FAILED can be validated again (status is ${from})`),
  },
  edited: { moves: editable, refusal: skillArchived },
  // A live skill gets an early health ping.
  endpoints_changed: {
    moves: { ...servedEdit, ACTIVE: ['ACTIVE', 'recheck_health'] },
    refusal: skillArchived,
  },
  // A new base URL is where paid traffic goes: it is validated again before the skill is payable.
  base_url_changed: {
    moves: { ...servedEdit, ACTIVE: ['PENDING_VALIDATION', 'revalidate'] },
    refusal: skillArchived,
  },
  archive: {
    moves: {
      PENDING_VALIDATION: ['ARCHIVED', 'set_status'],
      ACTIVE: ['ARCHIVED', 'set_status'],
      VALIDATION_FAILED: ['ARCHIVED', 'set_status'],
      ARCHIVED: ['ARCHIVED', 'none'],
    },
    refusal: () =>
      refusal(
        409,
        RegistryReason.SkillSuspended,
        'a suspended skill cannot be archived; contact support',
        'a suspended skill cannot be archived',
      ),
  },
  suspend: {
    moves: {
      PENDING_VALIDATION: ['SUSPENDED', 'set_status'],
      ACTIVE: ['SUSPENDED', 'set_status'],
      VALIDATION_FAILED: ['SUSPENDED', 'set_status'],
      SUSPENDED: ['SUSPENDED', 'none'],
    },
    refusal: skillArchived,
  },
  unsuspend: {
    // A lifted suspension is validated again before the skill can be paid for.
    moves: { SUSPENDED: ['PENDING_VALIDATION', 'revalidate'] },
    refusal: (from) => invalidState(`the skill is ${from}, not SUSPENDED`),
  },
};

function invalidState(message: string): HttpError {
  return refusal(409, RegistryReason.InvalidState, message, message);
}

/** The move `event` makes from `from`, or undefined when the machine has none (see `skillTransition`). */
export function findSkillTransition(from: SkillStatus, event: SkillEvent): SkillTransition | undefined {
  const move = MACHINE[event].moves[from];
  return move ? { from, event, to: move[0], effect: move[1] } : undefined;
}

/** The move `event` makes from `from`; an illegal one is a 409 (skill_archived, skill_suspended, invalid_state). */
export function skillTransition(from: SkillStatus, event: SkillEvent): SkillTransition {
  const transition = findSkillTransition(from, event);
  if (!transition) throw MACHINE[event].refusal(from);
  return transition;
}

/** Writes a transition (row locked by the caller), `also` in the same statement; false when it writes nothing. */
export async function applySkillTransition(
  trx: Transaction<RegistryDatabase>,
  skillId: string,
  transition: SkillTransition,
  options: { reason?: string | null; also?: Updateable<SkillsTable> } = {},
): Promise<boolean> {
  const { effect, to } = transition;
  if (effect === 'none') return false;
  const changes = {
    recheck_health: { health_checked_at: null },
    revalidate: { status: to, status_reason: null, validation_lease_until: null },
    set_status: { status: to, status_reason: options.reason ?? null, validation_lease_until: null },
  }[effect];
  await trx
    .updateTable('skills')
    .set((eb) => ({
      ...options.also,
      ...changes,
      ...(effect === 'revalidate' ? { validation_seq: eb('validation_seq', '+', 1) } : {}),
    }))
    .where('id', '=', skillId)
    .execute();
  return true;
}
