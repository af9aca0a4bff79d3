import { HttpError } from '@paygate/http';
import { SKILL_STATUSES, type SkillStatus } from '../src/db';
import {
  findSkillTransition,
  type SkillEffect,
  type SkillEvent,
  skillTransition,
} from '../src/skills/status';

/** Every move the machine allows: [from, event, to, effect]. Anything not listed is refused. */
const ALLOWED: [SkillStatus, SkillEvent, SkillStatus, SkillEffect][] = [
  ['PENDING_VALIDATION', 'validation_passed', 'ACTIVE', 'set_status'],
  ['PENDING_VALIDATION', 'validation_failed', 'VALIDATION_FAILED', 'set_status'],
  ['VALIDATION_FAILED', 'retry_validation', 'PENDING_VALIDATION', 'revalidate'],
  ['PENDING_VALIDATION', 'retry_validation', 'PENDING_VALIDATION', 'none'],
  ['PENDING_VALIDATION', 'edited', 'PENDING_VALIDATION', 'none'],
  ['ACTIVE', 'edited', 'ACTIVE', 'none'],
  ['VALIDATION_FAILED', 'edited', 'VALIDATION_FAILED', 'none'],
  ['SUSPENDED', 'edited', 'SUSPENDED', 'none'],
  ['PENDING_VALIDATION', 'endpoints_changed', 'PENDING_VALIDATION', 'revalidate'],
  ['VALIDATION_FAILED', 'endpoints_changed', 'PENDING_VALIDATION', 'revalidate'],
  ['ACTIVE', 'endpoints_changed', 'ACTIVE', 'recheck_health'],
  ['SUSPENDED', 'endpoints_changed', 'SUSPENDED', 'none'],
  ['PENDING_VALIDATION', 'base_url_changed', 'PENDING_VALIDATION', 'revalidate'],
  ['VALIDATION_FAILED', 'base_url_changed', 'PENDING_VALIDATION', 'revalidate'],
  ['ACTIVE', 'base_url_changed', 'PENDING_VALIDATION', 'revalidate'],
  ['SUSPENDED', 'base_url_changed', 'SUSPENDED', 'none'],
  ['PENDING_VALIDATION', 'archive', 'ARCHIVED', 'set_status'],
  ['ACTIVE', 'archive', 'ARCHIVED', 'set_status'],
  ['VALIDATION_FAILED', 'archive', 'ARCHIVED', 'set_status'],
  ['ARCHIVED', 'archive', 'ARCHIVED', 'none'],
  ['PENDING_VALIDATION', 'suspend', 'SUSPENDED', 'set_status'],
  ['ACTIVE', 'suspend', 'SUSPENDED', 'set_status'],
  ['VALIDATION_FAILED', 'suspend', 'SUSPENDED', 'set_status'],
  ['SUSPENDED', 'suspend', 'SUSPENDED', 'none'],
  ['SUSPENDED', 'unsuspend', 'PENDING_VALIDATION', 'revalidate'],
];

const EVENTS: SkillEvent[] = [
  'validation_passed',
  'validation_failed',
  'retry_validation',
  'edited',
  'endpoints_changed',
  'base_url_changed',
  'archive',
  'suspend',
  'unsuspend',
];

function refusal(from: SkillStatus, event: SkillEvent): HttpError {
  try {
    skillTransition(from, event);
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error(`${event} from ${from} was allowed`);
}

describe('skill state machine', () => {
  it.each(ALLOWED)('%s --%s--> %s (%s)', (from, event, to, effect) => {
    expect(skillTransition(from, event)).toEqual({ from, event, to, effect });
  });

  it('refuses every move it does not list, with a 409 and a rule', () => {
    const allowed = new Set(ALLOWED.map(([from, event]) => `${from} ${event}`));
    let refused = 0;
    for (const from of SKILL_STATUSES) {
      for (const event of EVENTS) {
        if (allowed.has(`${from} ${event}`)) continue;
        expect(findSkillTransition(from, event)).toBeUndefined();
        const error = refusal(from, event);
        expect(error.status).toBe(409);
        expect(error.details.rule).toEqual(expect.any(String));
        refused++;
      }
    }
    expect(refused).toBe(SKILL_STATUSES.length * EVENTS.length - ALLOWED.length);
  });

  it('names the rule an illegal move breaks, with the codes the API documents', () => {
    expect(refusal('ARCHIVED', 'edited').code).toBe('skill_archived');
    expect(refusal('ARCHIVED', 'endpoints_changed').code).toBe('skill_archived');
    expect(refusal('ARCHIVED', 'suspend').code).toBe('skill_archived');
    expect(refusal('SUSPENDED', 'archive').code).toBe('skill_suspended');
    const retry = refusal('ACTIVE', 'retry_validation');
    expect(retry.code).toBe('invalid_state');
    expect(retry.message).toBe('only a skill in VALIDATION_FAILED can be validated again (status is ACTIVE)');
    const unsuspend = refusal('ACTIVE', 'unsuspend');
    expect(unsuspend.code).toBe('invalid_state');
    expect(unsuspend.message).toBe('the skill is ACTIVE, not SUSPENDED');
    // A validation result that arrives after the skill moved on is stale, not a move.
    expect(findSkillTransition('SUSPENDED', 'validation_passed')).toBeUndefined();
    expect(findSkillTransition('ARCHIVED', 'validation_failed')).toBeUndefined();
  });
});
