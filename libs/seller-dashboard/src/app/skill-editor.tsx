import { DEFAULT_HOLD_HOURS } from '@paygate/contracts/holds';
import { useEffect, useState } from 'preact/hooks';
import { fieldErrors, newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { navigate } from './router';
import { EndpointFields } from './skill-endpoints';
import {
  draftFromSkill,
  type EndpointDraft,
  effectiveHoldHours,
  emptyDraft,
  SKILL_TYPES,
  type SkillDraft,
  skillBody,
  skillFieldId,
  slugify,
  usesDuration,
  usesShipping,
  validateSkillDraft,
} from './skill-form';
import type { Skill, SkillType } from './types';
import { ErrorNote, Field, Link, LoadState, useAction, useLoad } from './ui';

/** Create (no name) or edit (name) a skill: every SPEC field, type-specific ones only where they apply. */
export function SkillEditor(props: { name?: string }) {
  const { api } = useDashboard();
  const editing = props.name !== undefined;
  const [draft, setDraft] = useState<SkillDraft | undefined>(editing ? undefined : emptyDraft());
  const [nameTouched, setNameTouched] = useState(false);
  const [idempotencyKey] = useState(newIdempotencyKey);
  const loaded = useLoad(async () => {
    if (!props.name) return undefined;
    const skill = await api.request<Skill>('GET', `/api/v1/manage/skills/${props.name}`);
    setDraft(draftFromSkill(skill));
    return skill;
  }, [props.name]);
  const save = useAction();
  const [localErrors, setLocalErrors] = useState<Record<string, string>>({});
  const apiErrors = fieldErrors(save.error);
  const errors = { ...apiErrors, ...localErrors };
  const nameCheck = useNameAvailability(editing ? undefined : draft?.name);
  // A field the API refused gets the focus too (the form checked what it could before sending).
  useEffect(() => {
    const keys = Object.keys(fieldErrors(save.error));
    if (keys.length) focusFirstInvalid(keys.map(skillFieldId));
  }, [save.error]);
  if (!draft)
    return (
      <LoadState load={loaded} what="the skill">
        {() => null}
      </LoadState>
    );

  const set = (patch: Partial<SkillDraft>) => setDraft({ ...draft, ...patch });
  const setEndpoint = (index: number, patch: Partial<EndpointDraft>) =>
    set({ endpoints: draft.endpoints.map((e, i) => (i === index ? { ...e, ...patch } : e)) });
  const submit = async (event: Event) => {
    event.preventDefault();
    // Every field the form can check, at once; the focus goes to the first one to fix.
    const problems = validateSkillDraft(draft, { editing });
    if (!editing && nameCheck.taken && !problems.name)
      problems.name = `Name ${draft.name} is taken: choose another`;
    setLocalErrors(problems);
    if (Object.keys(problems).length) {
      focusFirstInvalid(Object.keys(problems).map(skillFieldId));
      return;
    }
    const saved = await save.run(() =>
      editing
        ? api.request<Skill>('PATCH', `/api/v1/manage/skills/${props.name}`, {
            body: skillBody(draft, { forUpdate: true }),
          })
        : api.request<Skill>('POST', '/api/v1/manage/skills', { body: skillBody(draft), idempotencyKey }),
    );
    if (saved) navigate(`/skills/${saved.name}`);
    else
      requestAnimationFrame(() => focusFirstInvalid(Object.keys(fieldErrors(save.error)).map(skillFieldId)));
  };
  const text = (key: keyof SkillDraft, label: string, hint?: string, type = 'text', required = false) => (
    <Field id={`skill-${key}`} label={label} hint={hint} error={errors[key]} required={required}>
      {(aria) => (
        <input
          {...aria}
          type={type}
          name={key}
          value={draft[key] as string}
          onInput={(e) => set({ [key]: (e.target as HTMLInputElement).value })}
        />
      )}
    </Field>
  );
  const typeDefault = DEFAULT_HOLD_HOURS[draft.type];
  return (
    <section aria-labelledby="editor-title">
      <h1 id="editor-title">{editing ? `Edit ${props.name}` : 'New skill'}</h1>
      <form onSubmit={submit} noValidate>
        {save.error && !Object.keys(apiErrors).length ? <ErrorNote error={save.error} /> : null}
        {Object.keys(errors).length > 0 && (
          <div role="alert" class="error-note" data-testid="form-errors">
            <p>
              {Object.keys(errors).length === 1
                ? 'One field needs'
                : `${Object.keys(errors).length} fields need`}{' '}
              a change:
            </p>
            <ul>
              {Object.entries(errors).map(([key, message]) => (
                <li key={key}>
                  <a href={`#${skillFieldId(key)}`}>{message}</a>
                </li>
              ))}
            </ul>
          </div>
        )}
        <fieldset>
          <legend>About the skill</legend>
          <Field id="skill-displayName" label="Display name" required error={errors.displayName}>
            {(aria) => (
              <input
                {...aria}
                name="displayName"
                value={draft.displayName}
                onInput={(e) => {
                  const displayName = (e.target as HTMLInputElement).value;
                  set({ displayName, ...(editing || nameTouched ? {} : { name: slugify(displayName) }) });
                }}
              />
            )}
          </Field>
          {editing ? (
            <p>
              Name (part of every public URL, cannot change): <code>{draft.name}</code>
            </p>
          ) : (
            <Field
              id="skill-name"
              label="Name (URL slug)"
              hint="kebab-case, 2–64 characters, unique; it becomes part of every public URL and cannot change"
              required
              error={errors.name}
              status={nameCheck.message}
            >
              {(aria) => (
                <input
                  {...aria}
                  name="name"
                  value={draft.name}
                  onInput={(e) => {
                    setNameTouched(true);
                    set({ name: (e.target as HTMLInputElement).value });
                  }}
                />
              )}
            </Field>
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
          {text('categories', 'Categories', 'comma-separated tags for discovery, e.g. weather, data')}
        </fieldset>
        <fieldset>
          <legend>How it is sold</legend>
          <div class="grid">
            <Field id="skill-type" label="Type" error={errors.type}>
              {(aria) => (
                <select
                  {...(aria as object)}
                  name="type"
                  value={draft.type}
                  onChange={(e) => set({ type: (e.target as HTMLSelectElement).value as SkillType })}
                >
                  {SKILL_TYPES.map((type) => (
                    <option key={type} value={type}>
                      {type}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field
              id="skill-mode"
              label="Verification mode"
              hint="PROXY: Paygate calls your API. TICKET: the buyer calls you with a signed ticket."
              error={errors.mode}
            >
              {(aria) => (
                <select
                  {...(aria as object)}
                  name="mode"
                  value={draft.mode}
                  onChange={(e) => set({ mode: (e.target as HTMLSelectElement).value as 'PROXY' | 'TICKET' })}
                >
                  <option value="PROXY">PROXY (default)</option>
                  <option value="TICKET">TICKET</option>
                </select>
              )}
            </Field>
          </div>
          {text('apiBaseUrl', 'API base URL', 'your API; https in production', 'url', true)}
          {usesDuration(draft.type) &&
            text('durationDays', 'Access duration (days)', `required for ${draft.type}`, 'number')}
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
          <Field
            id="skill-holdPeriodHours"
            label="Hold period (hours in escrow before settlement)"
            hint={`0–168. Leave empty for the ${draft.type} default of ${typeDefault} h; applied: ${effectiveHoldHours(draft)} h`}
            error={errors.holdPeriodHours}
          >
            {(aria) => (
              <input
                {...aria}
                type="number"
                min={0}
                max={168}
                name="holdPeriodHours"
                placeholder={String(typeDefault)}
                value={draft.holdPeriodHours}
                onInput={(e) => set({ holdPeriodHours: (e.target as HTMLInputElement).value })}
              />
            )}
          </Field>
        </fieldset>
        {!editing && (
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
              onClick={() =>
                set({
                  endpoints: [
                    ...draft.endpoints,
                    { path: '/', method: 'GET', priceUsdc: '0.01', description: '' },
                  ],
                })
              }
            >
              Add an endpoint
            </button>
          </fieldset>
        )}
        <div class="actions">
          <button type="submit" aria-busy={save.busy} disabled={save.busy}>
            {editing ? 'Save changes' : 'Create skill'}
          </button>
          <Link to={editing ? `/skills/${props.name}` : '/skills'} class="secondary">
            Cancel
          </Link>
        </div>
      </form>
    </section>
  );
}

/** Moves the focus (and the view) to the first of these controls that is on the page. */
function focusFirstInvalid(ids: string[]) {
  const elements = ids
    .map((id) => document.getElementById(id))
    .filter((element): element is HTMLElement => element !== null)
    .sort((a, b) => (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
  elements[0]?.focus();
  elements[0]?.scrollIntoView({ block: 'center' });
}

/** Whether a skill name is free, asked as it is typed (after a pause, the last answer wins). */
function useNameAvailability(name: string | undefined) {
  const { api } = useDashboard();
  const [state, setState] = useState<{ name: string; available: boolean; reason?: string }>();
  useEffect(() => {
    if (!name || name.length < 2) return;
    let current = true;
    const timer = setTimeout(() => {
      api
        .request<{ name: string; available: boolean; reason?: string }>(
          'GET',
          `/api/v1/manage/skill-names/${encodeURIComponent(name)}`,
        )
        .then((answer) => current && setState(answer))
        .catch(() => undefined); // the create call still checks
    }, 300);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [name]);
  if (!name || state?.name !== name) return { taken: false, message: undefined };
  return {
    taken: !state.available && state.reason === 'taken',
    message: state.available
      ? `${name} is available`
      : state.reason === 'taken'
        ? `${name} is taken`
        : undefined,
  };
}
