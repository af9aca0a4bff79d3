import { EventValidationError, SUBJECTS, type Subject, validateEvent } from '@paygate/contracts';
import { eventDataOf, eventOf, SampleError, sampleOf } from '../src/events';

const subjects = Object.keys(SUBJECTS) as Subject[];

describe('eventOf', () => {
  it.each(subjects)('builds a valid %s envelope from its schema alone', (subject) => {
    const event = eventOf(subject);
    expect(event.type).toBe(subject);
    expect(SUBJECTS[subject].owners).toContain(event.producer);
    expect(() => validateEvent(event)).not.toThrow();
  });

  it('puts the overrides over the sample and keeps the other fields', () => {
    const event = eventOf('payment.confirmed', { amount: '0.05', sellerId: 'seller-9' });
    expect(event.data.amount).toBe('0.05');
    expect(event.data.sellerId).toBe('seller-9');
    expect(event.data.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(event.data.chainId).toBeGreaterThanOrEqual(1);
  });

  it('refuses an override that breaks the schema, naming the field', () => {
    expect(() => eventOf('payment.confirmed', { amount: '0.0000001' })).toThrow(EventValidationError);
    expect(() => eventOf('payment.confirmed', { amount: '0.0000001' })).toThrow(/\/amount/);
  });

  it('refuses a producer that does not own the subject', () => {
    expect(() => eventOf('payment.confirmed', {}, { producer: 'notifier' })).toThrow(/does not own/);
  });

  it('gives the same data on every call (fixed samples, no clock)', () => {
    expect(eventDataOf('transfer.observed')).toEqual(eventDataOf('transfer.observed'));
  });
});

describe('sampleOf', () => {
  it('takes a union’s first branch that is not null', () => {
    expect(sampleOf({ anyOf: [{ type: 'null' }, { type: 'string', minLength: 3 }] }, '/x')).toBe('x-1');
  });

  it('names the field whose pattern it cannot satisfy', () => {
    expect(() => sampleOf({ type: 'string', pattern: '^z+$' }, '/thing/code')).toThrow(SampleError);
    expect(() => sampleOf({ type: 'string', pattern: '^z+$' }, '/thing/code')).toThrow(/\/thing\/code/);
  });
});
