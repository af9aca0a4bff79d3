import { useState } from 'preact/hooks';
import { newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { usd } from './format';
import { BLANK_ENDPOINT, type EndpointDraft, endpointBody, endpointExamples, METHODS } from './skill-form';
import type { Endpoint, HttpMethod, Skill } from './types';
import { CopyButton, ErrorNote, useAction } from './ui';
import { fieldsOf, SelectField, TextField, useForm } from './ui-forms';

export function EndpointFields(props: {
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
  const bind = (key: 'path' | 'priceUsdc' | 'description') => ({
    error: err(key),
    value: endpoint[key],
    onValue: (value: string) => props.onChange({ [key]: value }),
  });
  return (
    <fieldset class="endpoint-fields">
      <legend class="visually-hidden">Endpoint {props.index + 1}</legend>
      <div class="grid">
        <SelectField
          id={id('method')}
          label="Method"
          error={err('method')}
          value={endpoint.method}
          onValue={(method) => props.onChange({ method: method as HttpMethod })}
          options={METHODS}
        />
        <TextField id={id('path')} label="Path" hint="starts with /" required {...bind('path')} />
        <TextField
          id={id('price')}
          label="Price (USDC)"
          hint="up to 6 decimals"
          required
          {...bind('priceUsdc')}
          input={{ inputMode: 'decimal' }}
        />
      </div>
      <TextField id={id('description')} label="Description" {...bind('description')} />
      {props.onRemove && (
        <button type="button" class="outline secondary small" onClick={props.onRemove}>
          Remove endpoint {props.index + 1}
        </button>
      )}
    </fieldset>
  );
}

export function EndpointCard(props: { skill: Skill; endpoint: Endpoint; onChanged: (skill: Skill) => void }) {
  const { endpoint } = props;
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
      <EndpointExamples endpoint={endpoint} />
      <EndpointEditForm {...props} />
    </article>
  );
}

/** A live endpoint's price and description, saved; or the endpoint deactivated (after a confirmation). */
function EndpointEditForm(props: { skill: Skill; endpoint: Endpoint; onChanged: (skill: Skill) => void }) {
  const { api } = useDashboard();
  const { endpoint, skill } = props;
  const [values, set] = useForm({ priceUsdc: endpoint.priceUsdc, description: endpoint.description });
  const save = useAction();
  const field = fieldsOf(endpoint.endpointId, values, set, save.errors);
  const base = `/api/v1/manage/skills/${skill.name}/endpoints/${endpoint.endpointId}`;
  return (
    <form
      class="inline-form"
      onSubmit={async (event) => {
        event.preventDefault();
        const body = { priceUsdc: values.priceUsdc.trim(), description: values.description.trim() };
        const updated = await save.run(() => api.request<Skill>('PATCH', base, { body }));
        if (updated) props.onChanged(updated);
      }}
    >
      <div class="grid">
        <TextField
          {...field('priceUsdc', `${endpoint.endpointId}-price`)}
          label="Price (USDC)"
          input={{ inputMode: 'decimal' }}
        />
        <TextField {...field('description')} label="Description" />
      </div>
      <ErrorNote error={save.error} unlessOnAField />
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
  );
}

/** The endpoint's public URL called with curl (answered 402) and paid with the agent client, to copy. */
function EndpointExamples(props: { endpoint: Endpoint }) {
  const { endpoint } = props;
  const examples = endpointExamples(endpoint.url, endpoint.method, endpoint.priceUsdc);
  return (
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
  );
}

export function AddEndpoint(props: { skill: Skill; onAdded: (skill: Skill) => void }) {
  const { api } = useDashboard();
  const [endpoint, setEndpoint] = useState<EndpointDraft>(BLANK_ENDPOINT);
  const [key, setKey] = useState(newIdempotencyKey);
  const save = useAction();
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
            setEndpoint(BLANK_ENDPOINT);
            setKey(newIdempotencyKey());
          }
        }}
      >
        <EndpointFields
          prefix="new"
          index={0}
          endpoint={endpoint}
          errors={save.errors}
          onChange={(p) => setEndpoint({ ...endpoint, ...p })}
        />
        <ErrorNote error={save.error} unlessOnAField />
        <button type="submit" disabled={save.busy}>
          Add endpoint
        </button>
      </form>
    </details>
  );
}
