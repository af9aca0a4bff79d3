import { DEFAULT_HOLD_HOURS } from '@paygate/contracts/holds';
import { useEffect, useState } from 'preact/hooks';
import { fieldErrors, newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { usd } from './format';
import { navigate } from './router';
import {
  draftFromSkill,
  type EndpointDraft,
  effectiveHoldHours,
  emptyDraft,
  endpointBody,
  endpointExamples,
  METHODS,
  SKILL_TYPES,
  type SkillDraft,
  skillBody,
  skillFieldId,
  slugify,
  usesDuration,
  usesShipping,
  validateSkillDraft,
} from './skill-form';
import type { Endpoint, HttpMethod, Page, Skill, SkillType } from './types';
import {
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  Link,
  Loading,
  LoadState,
  Notice,
  StatusBadge,
  useAction,
  useLoad,
} from './ui';

export function SkillsPage() {
  const { api } = useDashboard();
  const [cursor, setCursor] = useState<string | undefined>();
  const [pages, setPages] = useState<Skill[]>([]);
  const list = useLoad(
    async () => {
      const page = await api.request<Page<Skill>>('GET', '/api/v1/manage/skills', {
        query: { limit: 50, cursor },
      });
      setPages((earlier) => (cursor ? [...earlier, ...page.data] : page.data));
      return page;
    },
    [cursor],
    { live: !cursor },
  );
  return (
    <section aria-labelledby="skills-title">
      <div class="title-row">
        <h1 id="skills-title">Skills</h1>
        <Link to="/skills/new" class="button">
          New skill
        </Link>
      </div>
      {list.data === undefined ? (
        <LoadState load={list} what="skills">
          {() => null}
        </LoadState>
      ) : pages.length === 0 ? (
        <Empty>
          No skills yet. A skill is a paid API, product or service;{' '}
          <Link to="/skills/new">create your first</Link>.
        </Empty>
      ) : (
        <section class="table-wrap" aria-label="Your skills (scrolls sideways)">
          <table class="striped">
            <caption class="visually-hidden">Your skills</caption>
            <thead>
              <tr>
                <th scope="col">Skill</th>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col">Endpoints</th>
                <th scope="col">Health</th>
              </tr>
            </thead>
            <tbody>
              {pages.map((skill) => {
                const active = skill.endpoints.filter((e) => e.active);
                const unhealthy = active.filter((e) => !e.isHealthy).length;
                return (
                  <tr key={skill.skillId}>
                    <td>
                      <Link to={`/skills/${skill.name}`}>{skill.displayName}</Link>
                      <br />
                      <small>
                        <code>{skill.name}</code>
                      </small>
                    </td>
                    <td>{skill.type}</td>
                    <td>
                      <StatusBadge status={skill.status} />
                      {skill.statusReason && (
                        <>
                          <br />
                          <small class="reason">{skill.statusReason}</small>
                        </>
                      )}
                    </td>
                    <td>{active.length}</td>
                    <td>
                      {active.length === 0 ? '—' : unhealthy ? `${unhealthy} unhealthy` : 'all healthy'}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </section>
      )}
      {list.data?.nextCursor && (
        <button
          type="button"
          class="outline"
          onClick={() => setCursor(list.data!.nextCursor!)}
          aria-busy={list.loading}
        >
          Load more
        </button>
      )}
    </section>
  );
}

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

function EndpointFields(props: {
  prefix: string;
  index: number;
  endpoint: EndpointDraft;
  errors: Record<string, string>;
  onChange: (patch: Partial<EndpointDraft>) => void;
  onRemove?: () => void;
}) {
  const { endpoint, errors, prefix } = props;
  const id = (key: string) => `ep${props.index}-${key}`;
  // Endpoints inside the create form are named by index (endpoints[0].path); a lone endpoint form by field.
  const err = (key: string) =>
    errors[`${prefix}.${key}`] ??
    errors[`endpoints.${props.index}.${key}`] ??
    (prefix === 'new' ? errors[key] : undefined);
  return (
    <fieldset class="endpoint-fields">
      <legend class="visually-hidden">Endpoint {props.index + 1}</legend>
      <div class="grid">
        <Field id={id('method')} label="Method" error={err('method')}>
          {(aria) => (
            <select
              {...(aria as object)}
              value={endpoint.method}
              onChange={(e) =>
                props.onChange({ method: (e.target as HTMLSelectElement).value as HttpMethod })
              }
            >
              {METHODS.map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          )}
        </Field>
        <Field id={id('path')} label="Path" hint="starts with /" required error={err('path')}>
          {(aria) => (
            <input
              {...aria}
              value={endpoint.path}
              onInput={(e) => props.onChange({ path: (e.target as HTMLInputElement).value })}
            />
          )}
        </Field>
        <Field
          id={id('price')}
          label="Price (USDC)"
          hint="up to 6 decimals"
          required
          error={err('priceUsdc')}
        >
          {(aria) => (
            <input
              {...aria}
              inputMode="decimal"
              value={endpoint.priceUsdc}
              onInput={(e) => props.onChange({ priceUsdc: (e.target as HTMLInputElement).value })}
            />
          )}
        </Field>
      </div>
      <Field id={id('description')} label="Description" error={err('description')}>
        {(aria) => (
          <input
            {...aria}
            value={endpoint.description}
            onInput={(e) => props.onChange({ description: (e.target as HTMLInputElement).value })}
          />
        )}
      </Field>
      {props.onRemove && (
        <button type="button" class="outline secondary small" onClick={props.onRemove}>
          Remove endpoint {props.index + 1}
        </button>
      )}
    </fieldset>
  );
}

export function SkillPage(props: { name: string }) {
  const { api } = useDashboard();
  const [skill, setSkill] = useState<Skill | undefined>();
  const loaded = useLoad(
    async () => {
      const found = await api.request<Skill>('GET', `/api/v1/manage/skills/${props.name}`);
      setSkill(found);
      return found;
      // Live: validation, health and status change while the page is open.
    },
    [props.name],
    { live: true },
  );
  const action = useAction();
  const [notice, setNotice] = useState<string>();
  if (!skill)
    return (
      <LoadState load={loaded} what="the skill">
        {() => null}
      </LoadState>
    );
  const act = async (path: string, message: string) => {
    const updated = await action.run(() =>
      api.request<Skill>('POST', `/api/v1/manage/skills/${skill.name}/${path}`),
    );
    if (updated) {
      setSkill(updated);
      setNotice(message);
    }
  };
  const endpoints = skill.endpoints.filter((e) => e.active);
  return (
    <section aria-labelledby="skill-title">
      <p>
        <Link to="/skills">← All skills</Link>
      </p>
      <div class="title-row">
        <h1 id="skill-title">{skill.displayName}</h1>
        <StatusBadge status={skill.status} />
      </div>
      {skill.statusReason && (
        <p class="reason" role="status">
          Why: {skill.statusReason}
        </p>
      )}
      {notice && <Notice>{notice}</Notice>}
      <ErrorNote error={action.error} />
      <dl class="facts">
        <dt>Name</dt>
        <dd>
          <code>{skill.name}</code>
        </dd>
        <dt>Type · mode</dt>
        <dd>
          {skill.type} · {skill.mode}
        </dd>
        <dt>API base URL</dt>
        <dd>
          <code>{skill.apiBaseUrl}</code>
        </dd>
        <dt>Hold period</dt>
        <dd>{skill.holdPeriodHours} h</dd>
        {skill.durationDays !== null && (
          <>
            <dt>Access duration</dt>
            <dd>{skill.durationDays} days</dd>
          </>
        )}
        {skill.requiresShipping !== null && (
          <>
            <dt>Shipping</dt>
            <dd>{skill.requiresShipping ? 'required' : 'not required'}</dd>
          </>
        )}
        <dt>Categories</dt>
        <dd>{skill.categories.join(', ') || '—'}</dd>
        <dt>Description</dt>
        <dd>{skill.description}</dd>
      </dl>
      <div class="actions">
        <Link to={`/skills/${skill.name}/edit`} class="button outline">
          Edit details
        </Link>
        <button type="button" class="outline" onClick={() => loaded.reload()}>
          Refresh status
        </button>
        {skill.status === 'VALIDATION_FAILED' && (
          <button
            type="button"
            onClick={() => act('validate', 'Validation started again.')}
            disabled={action.busy}
          >
            Validate again
          </button>
        )}
        {skill.status !== 'ARCHIVED' && skill.status !== 'SUSPENDED' && (
          <button
            type="button"
            class="outline contrast"
            disabled={action.busy}
            onClick={() => {
              if (
                window.confirm(
                  `Archive ${skill.name}? This is final: it stops selling and its name stays taken.`,
                )
              )
                void act('archive', 'The skill is archived.');
            }}
          >
            Archive
          </button>
        )}
      </div>
      <h2>Endpoints</h2>
      {endpoints.length === 0 ? (
        <Empty>No active endpoints. Add one below; a skill needs at least one to pass validation.</Empty>
      ) : (
        endpoints.map((endpoint) => (
          <EndpointCard key={endpoint.endpointId} skill={skill} endpoint={endpoint} onChanged={setSkill} />
        ))
      )}
      {skill.status !== 'ARCHIVED' && <AddEndpoint skill={skill} onAdded={setSkill} />}
      <SkillMd skill={skill} onSaved={() => loaded.reload()} />
    </section>
  );
}

function EndpointCard(props: { skill: Skill; endpoint: Endpoint; onChanged: (skill: Skill) => void }) {
  const { api } = useDashboard();
  const { endpoint, skill } = props;
  const [price, setPrice] = useState(endpoint.priceUsdc);
  const [description, setDescription] = useState(endpoint.description);
  const save = useAction();
  const errors = fieldErrors(save.error);
  const examples = endpointExamples(endpoint.url, endpoint.method, endpoint.priceUsdc);
  const base = `/api/v1/manage/skills/${skill.name}/endpoints/${endpoint.endpointId}`;
  const id = endpoint.endpointId;
  return (
    <article class="endpoint" aria-labelledby={`${id}-title`}>
      <header>
        <h3 id={`${id}-title`}>
          <span class="method">{endpoint.method}</span> <code>{endpoint.path}</code> —{' '}
          {usd(endpoint.priceUsdc)}{' '}
          <span class={`badge ${endpoint.isHealthy ? 'good' : 'bad'}`}>
            {endpoint.isHealthy ? 'healthy' : 'unhealthy'}
          </span>
        </h3>
      </header>
      <p>
        Public URL: <code class="wrap">{endpoint.url}</code>{' '}
        <CopyButton text={endpoint.url} label="public URL" />
      </p>
      <details>
        <summary>Try it: curl and agent examples</summary>
        <p>Without payment the answer is 402 with what to pay:</p>
        <pre>
          <code>{examples.curl}</code>
        </pre>
        <CopyButton text={examples.curl} label="curl example" />
        <p>An agent pays and calls it with the agent client:</p>
        <pre>
          <code>{examples.agent}</code>
        </pre>
        <CopyButton text={examples.agent} label="agent example" />
      </details>
      <form
        class="inline-form"
        onSubmit={async (event) => {
          event.preventDefault();
          const updated = await save.run(() =>
            api.request<Skill>('PATCH', base, {
              body: { priceUsdc: price.trim(), description: description.trim() },
            }),
          );
          if (updated) props.onChanged(updated);
        }}
      >
        <div class="grid">
          <Field id={`${id}-price`} label="Price (USDC)" error={errors.priceUsdc}>
            {(aria) => (
              <input
                {...aria}
                inputMode="decimal"
                value={price}
                onInput={(e) => setPrice((e.target as HTMLInputElement).value)}
              />
            )}
          </Field>
          <Field id={`${id}-description`} label="Description" error={errors.description}>
            {(aria) => (
              <input
                {...aria}
                value={description}
                onInput={(e) => setDescription((e.target as HTMLInputElement).value)}
              />
            )}
          </Field>
        </div>
        {save.error && !Object.keys(errors).length ? <ErrorNote error={save.error} /> : null}
        <div class="actions">
          <button type="submit" class="outline" disabled={save.busy}>
            Save endpoint
          </button>
          <button
            type="button"
            class="outline contrast"
            disabled={save.busy}
            onClick={async () => {
              if (!window.confirm(`Stop selling ${endpoint.method} ${endpoint.path}?`)) return;
              const updated = await save.run(() => api.request<Skill>('POST', `${base}/deactivate`));
              if (updated) props.onChanged(updated);
            }}
          >
            Deactivate
          </button>
        </div>
      </form>
    </article>
  );
}

function AddEndpoint(props: { skill: Skill; onAdded: (skill: Skill) => void }) {
  const { api } = useDashboard();
  const blank: EndpointDraft = { path: '/', method: 'GET', priceUsdc: '0.01', description: '' };
  const [endpoint, setEndpoint] = useState<EndpointDraft>(blank);
  const [key, setKey] = useState(newIdempotencyKey);
  const save = useAction();
  const errors = fieldErrors(save.error);
  return (
    <details>
      <summary class="add-endpoint">Add an endpoint</summary>
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          const updated = await save.run(() =>
            api.request<Skill>('POST', `/api/v1/manage/skills/${props.skill.name}/endpoints`, {
              body: endpointBody(endpoint),
              idempotencyKey: key,
            }),
          );
          if (updated) {
            props.onAdded(updated);
            setEndpoint(blank);
            setKey(newIdempotencyKey());
          }
        }}
      >
        <EndpointFields
          prefix="new"
          index={0}
          endpoint={endpoint}
          errors={errors}
          onChange={(p) => setEndpoint({ ...endpoint, ...p })}
        />
        {save.error && !Object.keys(errors).length ? <ErrorNote error={save.error} /> : null}
        <button type="submit" disabled={save.busy}>
          Add endpoint
        </button>
      </form>
    </details>
  );
}

function SkillMd(props: { skill: Skill; onSaved: () => void }) {
  const { api } = useDashboard();
  const [editing, setEditing] = useState<string | undefined>();
  const md = useLoad(
    () => api.request<string>('GET', `/api/v1/manage/skills/${props.skill.name}/skill-md`, { text: true }),
    [props.skill.name, props.skill.skillMdVersion],
  );
  const save = useAction();
  const errors = fieldErrors(save.error);
  return (
    <section aria-labelledby="skillmd-title">
      <h2 id="skillmd-title">SKILL.md</h2>
      <p>
        Version <strong data-testid="skillmd-version">{props.skill.skillMdVersion}</strong> ·{' '}
        {props.skill.skillMdSource === 'manual' ? 'edited by hand' : 'generated'} · agents read it at{' '}
        <code class="wrap">{props.skill.skillMdUrl}</code>
      </p>
      {props.skill.skillMdSource === 'manual' && (
        <p>
          <small>A later endpoint change regenerates SKILL.md and replaces this hand edit.</small>
        </p>
      )}
      <ErrorNote error={md.error} onRetry={md.reload} />
      {md.loading && !md.data ? (
        <Loading what="SKILL.md" />
      ) : editing === undefined ? (
        <>
          <pre class="skill-md">{md.data}</pre>
          <button type="button" class="outline" onClick={() => setEditing(md.data ?? '')}>
            Edit SKILL.md by hand
          </button>
        </>
      ) : (
        <form
          onSubmit={async (event) => {
            event.preventDefault();
            const saved = await save.run(() =>
              api.request('PUT', `/api/v1/manage/skills/${props.skill.name}/skill-md`, {
                body: { content: editing },
              }),
            );
            if (saved !== undefined) {
              setEditing(undefined);
              props.onSaved();
            }
          }}
        >
          <Field
            id="skillmd-content"
            label="SKILL.md (YAML frontmatter, then Markdown)"
            error={errors.content}
          >
            {(aria) => (
              <textarea
                {...(aria as object)}
                rows={18}
                class="mono"
                value={editing}
                onInput={(e) => setEditing((e.target as HTMLTextAreaElement).value)}
              />
            )}
          </Field>
          {save.error && !errors.content ? <ErrorNote error={save.error} /> : null}
          <div class="actions">
            <button type="submit" disabled={save.busy}>
              Save SKILL.md
            </button>
            <button type="button" class="secondary outline" onClick={() => setEditing(undefined)}>
              Cancel
            </button>
          </div>
        </form>
      )}
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
