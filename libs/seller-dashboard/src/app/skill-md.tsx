import { useState } from 'preact/hooks';
import { useDashboard } from './context';
import type { Skill } from './types';
import { type Action, ErrorNote, Loading, useAction, useLoad } from './ui';
import { Field } from './ui-forms';

export function SkillMd(props: { skill: Skill; onSaved: () => void }) {
  const { api } = useDashboard();
  const [editing, setEditing] = useState<string | undefined>();
  const md = useLoad(
    () => api.request<string>('GET', `/api/v1/manage/skills/${props.skill.name}/skill-md`, { text: true }),
    [props.skill.name, props.skill.skillMdVersion],
  );
  // Kept while the form is closed: a failed save's error shows again when it is opened.
  const save = useAction();
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
        <SkillMdForm
          skill={props.skill}
          save={save}
          content={editing}
          onContent={setEditing}
          onDone={() => {
            setEditing(undefined);
            props.onSaved();
          }}
          onCancel={() => setEditing(undefined)}
        />
      )}
    </section>
  );
}

/** SKILL.md edited by hand, saved in place of the generated one. */
function SkillMdForm(props: {
  skill: Skill;
  save: Action;
  content: string;
  onContent: (content: string) => void;
  onDone: () => void;
  onCancel: () => void;
}) {
  const { api } = useDashboard();
  const { save } = props;
  const { errors } = save;
  return (
    <form
      onSubmit={async (event) => {
        event.preventDefault();
        const saved = await save.run(() =>
          api.request('PUT', `/api/v1/manage/skills/${props.skill.name}/skill-md`, {
            body: { content: props.content },
          }),
        );
        if (saved !== undefined) props.onDone();
      }}
    >
      <Field id="skillmd-content" label="SKILL.md (YAML frontmatter, then Markdown)" error={errors.content}>
        {(aria) => (
          <textarea
            {...(aria as object)}
            rows={18}
            class="mono"
            value={props.content}
            onInput={(e) => props.onContent((e.target as HTMLTextAreaElement).value)}
          />
        )}
      </Field>
      {save.error && !errors.content ? <ErrorNote error={save.error} /> : null}
      <div class="actions">
        <button type="submit" disabled={save.busy}>
          Save SKILL.md
        </button>
        <button type="button" class="secondary outline" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
