import { DEFAULT_HOLD_HOURS } from '@paygate/contracts/holds';
import { EndpointFields } from './skill-endpoints';
import {
  BLANK_ENDPOINT,
  type EndpointDraft,
  effectiveHoldHours,
  SKILL_TYPES,
  type SkillDraft,
  skillFieldId,
  slugify,
  usesDuration,
  usesShipping,
} from './skill-form';
import type { SkillType } from './types';
import { Field, fieldsOf, SelectField, TextField } from './ui-forms';

/** What every part of the skill form gets: the draft, its errors by field, and a change to it. */
interface DraftProps {
  draft: SkillDraft;
  errors: Record<string, string>;
  set: (patch: Partial<SkillDraft>) => void;
}

/** Every invalid field at once, each linked to its control. */
export function FormErrorSummary(props: { errors: Record<string, string> }) {
  const entries = Object.entries(props.errors);
  if (entries.length === 0) return null;
  return (
    <div role="alert" class="error-note" data-testid="form-errors">
      <p>{entries.length === 1 ? 'One field needs' : `${entries.length} fields need`} a change:</p>
      <ul>
        {entries.map(([key, message]) => (
          <li key={key}>
            <a href={`#${skillFieldId(key)}`}>{message}</a>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Display name, name (a new skill only: it derives from the display name until typed), description, categories. */
export function AboutFieldset(
  props: DraftProps & {
    editing: boolean;
    nameTouched: boolean;
    onNameTyped: () => void;
    nameStatus: string | undefined;
  },
) {
  const { draft, errors, set, editing } = props;
  const field = fieldsOf('skill', draft, set, errors);
  return (
    <fieldset>
      <legend>About the skill</legend>
      <TextField
        {...field('displayName')}
        label="Display name"
        required
        onValue={(displayName) =>
          set({ displayName, ...(editing || props.nameTouched ? {} : { name: slugify(displayName) }) })
        }
        input={{ name: 'displayName' }}
      />
      {editing ? (
        <p>
          Name (part of every public URL, cannot change): <code>{draft.name}</code>
        </p>
      ) : (
        <TextField
          label="Name (URL slug)"
          hint="kebab-case, 2–64 characters, unique; it becomes part of every public URL and cannot change"
          required
          {...field('name')}
          status={props.nameStatus}
          onValue={(name) => {
            props.onNameTyped();
            set({ name });
          }}
          input={{ name: 'name' }}
        />
      )}
      <Field
        id="skill-description"
        label="Description"
        hint="at least 10 characters"
        required
        error={errors.description}
      >
        {(aria) => (
          <textarea
            {...(aria as object)}
            name="description"
            rows={3}
            value={draft.description}
            onInput={(e) => set({ description: (e.target as HTMLTextAreaElement).value })}
          />
        )}
      </Field>
      <TextField
        {...field('categories')}
        label="Categories"
        hint="comma-separated tags for discovery, e.g. weather, data"
        input={{ type: 'text', name: 'categories' }}
      />
    </fieldset>
  );
}

function TypeAndMode(props: DraftProps) {
  const { draft, errors, set } = props;
  return (
    <div class="grid">
      <SelectField
        id="skill-type"
        label="Type"
        error={errors.type}
        value={draft.type}
        onValue={(type) => set({ type: type as SkillType })}
        select={{ name: 'type' }}
        options={SKILL_TYPES}
      />
      <SelectField
        id="skill-mode"
        label="Verification mode"
        hint="PROXY: Paygate calls your API. TICKET: the buyer calls you with a signed ticket."
        error={errors.mode}
        value={draft.mode}
        onValue={(mode) => set({ mode: mode as SkillDraft['mode'] })}
        select={{ name: 'mode' }}
      >
        <option value="PROXY">PROXY (default)</option>
        <option value="TICKET">TICKET</option>
      </SelectField>
    </div>
  );
}

/** Type, mode, API base URL, the type's own fields and the hold period (with the type's default shown). */
export function SellingFieldset(props: DraftProps) {
  const { draft, set } = props;
  const field = fieldsOf('skill', draft, set, props.errors);
  const typeDefault = DEFAULT_HOLD_HOURS[draft.type];
  return (
    <fieldset>
      <legend>How it is sold</legend>
      <TypeAndMode {...props} />
      <TextField
        {...field('apiBaseUrl')}
        label="API base URL"
        hint="your API; https in production"
        required
        input={{ type: 'url', name: 'apiBaseUrl' }}
      />
      {usesDuration(draft.type) && (
        <TextField
          {...field('durationDays')}
          label="Access duration (days)"
          hint={`required for ${draft.type}`}
          input={{ type: 'number', name: 'durationDays' }}
        />
      )}
      {usesShipping(draft.type) && (
        <label for="skill-requiresShipping">
          <input
            id="skill-requiresShipping"
            type="checkbox"
            checked={draft.requiresShipping}
            onChange={(e) => set({ requiresShipping: (e.target as HTMLInputElement).checked })}
          />
          Requires a shipping address
        </label>
      )}
      <TextField
        {...field('holdPeriodHours')}
        label="Hold period (hours in escrow before settlement)"
        hint={`0–168. Leave empty for the ${draft.type} default of ${typeDefault} h; applied: ${effectiveHoldHours(draft)} h`}
        input={{
          type: 'number',
          min: 0,
          max: 168,
          name: 'holdPeriodHours',
          placeholder: String(typeDefault),
        }}
      />
    </fieldset>
  );
}

/** A new skill's endpoints (an existing skill changes them one by one on its page). */
export function NewEndpointsFieldset(props: DraftProps) {
  const { draft, errors, set } = props;
  const setEndpoint = (index: number, patch: Partial<EndpointDraft>) =>
    set({ endpoints: draft.endpoints.map((e, i) => (i === index ? { ...e, ...patch } : e)) });
  return (
    <fieldset>
      <legend>Priced endpoints</legend>
      {draft.endpoints.map((endpoint, index) => (
        <EndpointFields
          key={index}
          prefix={`endpoints[${index}]`}
          index={index}
          endpoint={endpoint}
          errors={errors}
          onChange={(patch) => setEndpoint(index, patch)}
          onRemove={
            draft.endpoints.length > 1
              ? () => set({ endpoints: draft.endpoints.filter((_, i) => i !== index) })
              : undefined
          }
        />
      ))}
      <button
        type="button"
        class="outline secondary"
        onClick={() => set({ endpoints: [...draft.endpoints, BLANK_ENDPOINT] })}
      >
        Add an endpoint
      </button>
    </fieldset>
  );
}
