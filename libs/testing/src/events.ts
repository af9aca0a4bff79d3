/** Test events whose data is sampled from the subject's TypeBox schema, so a schema change reaches every test. */
import { type Bus, encodeEnvelope } from '@paygate/bus';
import {
  createEvent,
  type EventData,
  type EventEnvelope,
  type ServiceName,
  SUBJECTS,
  type Subject,
  type TraceContext,
} from '@paygate/contracts';

/** A JSON Schema node as TypeBox emits it. */
type SchemaNode = Record<string, any>;

/** A fixed instant, so samples are the same from run to run (override the time fields a test depends on). */
const SAMPLE_TIME = '2026-01-01T00:00:00.000Z';

// Candidates tried in order against a string's pattern: the contracts' address, hash and amount primitives.
const PATTERN_CANDIDATES = [
  `0x${'ab'.repeat(20)}`,
  `0x${'cd'.repeat(32)}`,
  '1',
  '01JD0000000000000000000000',
];

/** How a sample could not be derived (a pattern none of the candidates matches): the path names the field. */
export class SampleError extends Error {
  constructor(
    readonly path: string,
    readonly rule: string,
  ) {
    super(`no sample for ${path}: ${rule}; pass it in the overrides`);
    this.name = 'SampleError';
  }
}

function sampleString(node: SchemaNode, path: string, name: string): string {
  if (node.format === 'date-time') return SAMPLE_TIME;
  if (node.pattern !== undefined) {
    const pattern = new RegExp(node.pattern);
    const found = PATTERN_CANDIDATES.find((candidate) => pattern.test(candidate));
    if (found === undefined) throw new SampleError(path, `pattern ${node.pattern}`);
    return found;
  }
  const base = `${name || 'value'}-1`.padEnd(node.minLength ?? 0, 'x');
  return node.maxLength === undefined ? base : base.slice(0, node.maxLength);
}

function sampleNumber(node: SchemaNode): number {
  const low = node.minimum ?? (node.exclusiveMinimum === undefined ? 1 : node.exclusiveMinimum + 1);
  return node.maximum === undefined ? low : Math.min(low, node.maximum);
}

/** The properties `required` and the constraint keywords require (of an `anyOf`, its first branch's). */
function constraintRequired(node: SchemaNode): string[] {
  return [
    ...(node.required ?? []),
    ...(node.allOf ?? []).flatMap(constraintRequired),
    ...(node.anyOf?.[0] ? constraintRequired(node.anyOf[0]) : []),
  ];
}

function sampleObject(node: SchemaNode, path: string): Record<string, unknown> {
  const keys = new Set([...(node.required ?? []), ...(node.allOf ?? []).flatMap(constraintRequired)]);
  const result: Record<string, unknown> = {};
  for (const key of keys) result[key] = sampleOf(node.properties?.[key] ?? {}, `${path}/${key}`);
  return result;
}

/** The smallest valid value of a schema: required properties only, a union's first branch that is not null. */
export function sampleOf(schema: unknown, path = ''): unknown {
  const node = schema as SchemaNode;
  if (node.const !== undefined) return node.const;
  if (node.enum !== undefined) return node.enum[0];
  if (node.default !== undefined) return node.default;
  if (node.type === 'object') return sampleObject(node, path);
  const branches: SchemaNode[] | undefined = node.anyOf ?? node.oneOf;
  if (branches !== undefined) {
    const branch = branches.find((b) => b.type !== 'null') ?? branches[0]!;
    return sampleOf(branch, path);
  }
  if (node.allOf !== undefined) {
    return Object.assign({}, ...node.allOf.map((part: SchemaNode) => sampleOf(part, path)));
  }
  const name = path.slice(path.lastIndexOf('/') + 1);
  switch (Array.isArray(node.type) ? node.type[0] : node.type) {
    case 'array':
      return Array.from({ length: node.minItems ?? 0 }, (_, i) => sampleOf(node.items ?? {}, `${path}/${i}`));
    case 'string':
      return sampleString(node, path, name);
    case 'integer':
    case 'number':
      return sampleNumber(node);
    case 'boolean':
      return false;
    default:
      return null;
  }
}

/** A sample of a subject's data with the overrides on top (not yet validated: eventOf validates). */
export function eventDataOf<S extends Subject>(
  subject: S,
  overrides: Partial<EventData<S>> = {},
): EventData<S> {
  const sample = sampleOf(SUBJECTS[subject].schema, subject) as Record<string, unknown>;
  return { ...sample, ...overrides } as EventData<S>;
}

interface EventOptions {
  /** Default: the subject's first owner (the contracts refuse a producer that does not own the subject). */
  producer?: ServiceName;
  occurredAt?: Date;
  id?: string;
  trace?: Partial<TraceContext>;
}

/** A valid envelope of `subject`, validated as on publish (a bad override throws EventValidationError). */
export function eventOf<S extends Subject>(
  subject: S,
  overrides: Partial<EventData<S>> = {},
  options: EventOptions = {},
): EventEnvelope<S, EventData<S>> {
  const { producer = SUBJECTS[subject].owners[0] as ServiceName, ...rest } = options;
  return createEvent(subject, producer, eventDataOf(subject, overrides), rest);
}

/** Publishes an envelope to its stream as its outbox relay would, deduplicated by `msgId` (default: its id). */
export async function publishEvent(
  bus: Bus,
  envelope: EventEnvelope,
  options: { msgId?: string } = {},
): Promise<string> {
  await bus.js.publish(bus.subjectFor(envelope.type), encodeEnvelope(envelope), {
    msgID: options.msgId ?? envelope.id,
  });
  return envelope.id;
}
