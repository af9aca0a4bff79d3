import Ajv, { type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { EnvelopeSchema, type EventEnvelope, newEventId, type TraceContext } from './envelope';
import { type EventData, isSubject, type ServiceName, SUBJECTS, type Subject } from './subjects';

/** One ajv instance for every schema of the contracts (events and RPCs); it caches each compiled schema. */
export const ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
const validateEnvelopeShape = ajv.compile(EnvelopeSchema);

export const describeErrors = (errors: ErrorObject[]) =>
  errors.map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`).join('; ');

export class EventValidationError extends Error {
  constructor(
    readonly subject: string,
    readonly errors: ErrorObject[] | string,
  ) {
    super(`invalid ${subject} event: ${typeof errors === 'string' ? errors : describeErrors(errors)}`);
    this.name = 'EventValidationError';
  }
}

export type TypedEnvelope<S extends Subject> = EventEnvelope<S, EventData<S>>;

/** Builds and validates an event for publishing; refuses a producer that does not own the subject. */
export function createEvent<S extends Subject>(
  type: S,
  producer: ServiceName,
  data: EventData<S>,
  options: { trace?: Partial<TraceContext>; occurredAt?: Date; id?: string } = {},
): TypedEnvelope<S> {
  const definition = SUBJECTS[type];
  if (!(definition.owners as readonly string[]).includes(producer)) {
    throw new EventValidationError(type, `${producer} does not own ${type}`);
  }
  const { traceparent, tracestate } = options.trace ?? {};
  const envelope: TypedEnvelope<S> = {
    id: options.id ?? newEventId(),
    type,
    version: definition.version,
    occurredAt: (options.occurredAt ?? new Date()).toISOString(),
    producer,
    // An empty carrier (no active span) means no trace context, not an invalid one.
    ...(traceparent ? { trace: { traceparent, ...(tracestate ? { tracestate } : {}) } } : {}),
    data,
  };
  return validateEvent(envelope) as TypedEnvelope<S>;
}

/** Validates an envelope and its data against the subject's schema (on publish and on receipt). */
export function validateEvent(value: unknown): EventEnvelope<Subject> {
  if (!validateEnvelopeShape(value))
    throw new EventValidationError('envelope', validateEnvelopeShape.errors ?? []);
  const envelope = value as EventEnvelope;
  if (!isSubject(envelope.type)) throw new EventValidationError(envelope.type, 'unknown subject');
  const validator = ajv.compile(SUBJECTS[envelope.type].schema);
  if (!validator(envelope.data)) throw new EventValidationError(envelope.type, validator.errors ?? []);
  return envelope as EventEnvelope<Subject>;
}
