import { type Static, Type } from '@sinclair/typebox';
import { monotonicFactory, ulid } from 'ulid';
import { ClosedObject, IsoTime } from './primitives';

export const TraceContext = ClosedObject({
  traceparent: Type.String({ maxLength: 128 }),
  tracestate: Type.Optional(Type.String({ maxLength: 512 })),
});
export type TraceContext = Static<typeof TraceContext>;

/** Every event on the bus travels in this envelope; `data` is validated against the subject's own schema. */
export const EnvelopeSchema = ClosedObject({
  id: Type.String({ pattern: '^[0-9A-HJKMNP-TV-Z]{26}$', description: 'ULID: time-sortable, unique' }),
  type: Type.String({ minLength: 3 }),
  version: Type.Integer({ minimum: 1 }),
  occurredAt: IsoTime,
  producer: Type.String({ minLength: 1 }),
  trace: Type.Optional(TraceContext),
  data: Type.Unknown(),
});

export type EventEnvelope<TType extends string = string, TData = unknown> = Omit<
  Static<typeof EnvelopeSchema>,
  'type' | 'data'
> & { type: TType; data: TData };

// ulid's own PRNG calls getRandomValues per character (about 80 µs an id): the same CSPRNG, drawn 4 KiB at a time.
const randomPool = new Uint32Array(1024);
let randomPoolAt = randomPool.length;
function pooledRandom(): number {
  if (randomPoolAt === randomPool.length) {
    globalThis.crypto.getRandomValues(randomPool);
    randomPoolAt = 0;
  }
  return randomPool[randomPoolAt++]! / 0x1_0000_0000;
}

const nextUlid = monotonicFactory(pooledRandom);
/** Time-sortable unique id (ULID), monotonic within this process. */
export function newEventId(): string {
  return nextUlid();
}

/** A ULID with all 80 random bits fresh: unguessable, for an id that is a capability. Not monotonic. */
export function newRandomUlid(): string {
  return ulid(Date.now(), pooledRandom);
}
