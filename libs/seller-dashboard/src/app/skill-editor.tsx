import { useEffect, useState } from 'preact/hooks';
import { newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { navigate } from './router';
import {
  AboutFieldset,
  FormErrorSummary,
  NewEndpointsFieldset,
  SellingFieldset,
} from './skill-editor-fields';
import {
  draftFromSkill,
  emptyDraft,
  type SkillDraft,
  skillBody,
  skillFieldId,
  validateSkillDraft,
} from './skill-form';
import type { Skill } from './types';
import { ErrorNote, Link, LoadState, useAction, useLoad } from './ui';

/** Create (no name) or edit (name) a skill: every field (docs/api.md, "Skills"), type-specific ones where they apply. */
export function SkillEditor(props: { name?: string }) {
  const { api } = useDashboard();
  const editing = props.name !== undefined;
  const [draft, setDraft] = useState<SkillDraft | undefined>(editing ? undefined : emptyDraft());
  const loaded = useLoad(async () => {
    if (!props.name) return undefined;
    const skill = await api.request<Skill>('GET', `/api/v1/manage/skills/${props.name}`);
    setDraft(draftFromSkill(skill));
    return skill;
  }, [props.name]);
  if (!draft) return <LoadState load={loaded} what="the skill" />;
  return <SkillForm name={props.name} draft={draft} setDraft={setDraft} />;
}

/** The skill's fields, checked at once on submit (the focus on the first to fix), then created or saved. */
function SkillForm(props: { name?: string; draft: SkillDraft; setDraft: (draft: SkillDraft) => void }) {
  const { draft } = props;
  const editing = props.name !== undefined;
  const [nameTouched, setNameTouched] = useState(false);
  const nameCheck = useNameAvailability(editing ? undefined : draft.name);
  const { save, errors, submit } = useSkillSave(props.name, draft, nameCheck.taken);
  const set = (patch: Partial<SkillDraft>) => props.setDraft({ ...draft, ...patch });
  return (
    <section aria-labelledby="editor-title">
      <h1 id="editor-title">{editing ? `Edit ${props.name}` : 'New skill'}</h1>
      <form onSubmit={submit} noValidate>
        <ErrorNote error={save.error} unlessOnAField />
        <FormErrorSummary errors={errors} />
        <AboutFieldset
          draft={draft}
          errors={errors}
          set={set}
          editing={editing}
          nameTouched={nameTouched}
          onNameTyped={() => setNameTouched(true)}
          nameStatus={nameCheck.message}
        />
        <SellingFieldset draft={draft} errors={errors} set={set} />
        {!editing && <NewEndpointsFieldset draft={draft} errors={errors} set={set} />}
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

/** Checks the draft, then creates the skill (once: one idempotency key) or saves its changes, and opens it. */
function useSkillSave(name: string | undefined, draft: SkillDraft, nameTaken: boolean) {
  const { api } = useDashboard();
  const editing = name !== undefined;
  const [idempotencyKey] = useState(newIdempotencyKey);
  const save = useAction();
  const [localErrors, setLocalErrors] = useState<Record<string, string>>({});
  // A field the API refused gets the focus too (the form checked what it could before sending).
  useEffect(() => {
    const keys = Object.keys(save.errors);
    if (keys.length) focusFirstInvalid(keys.map(skillFieldId));
  }, [save.error]);
  const submit = async (event: Event) => {
    event.preventDefault();
    // Every field the form can check, at once; the focus goes to the first one to fix.
    const problems = validateSkillDraft(draft, { editing });
    if (!editing && nameTaken && !problems.name)
      problems.name = `Name ${draft.name} is taken: choose another`;
    setLocalErrors(problems);
    if (Object.keys(problems).length) {
      focusFirstInvalid(Object.keys(problems).map(skillFieldId));
      return;
    }
    const saved = await save.run(() =>
      editing
        ? api.request<Skill>('PATCH', `/api/v1/manage/skills/${name}`, {
            body: skillBody(draft, { forUpdate: true }),
          })
        : api.request<Skill>('POST', '/api/v1/manage/skills', { body: skillBody(draft), idempotencyKey }),
    );
    if (saved) navigate(`/skills/${saved.name}`);
  };
  return { save, errors: { ...save.errors, ...localErrors }, submit };
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

type NameAnswer = { name: string; available: boolean; reason?: string };

/** Whether a skill name is free, asked as it is typed (after a pause, the last answer wins). */
function useNameAvailability(name: string | undefined) {
  const { api } = useDashboard();
  const [state, setState] = useState<NameAnswer>();
  useEffect(() => {
    if (!name || name.length < 2) return;
    let current = true;
    const timer = setTimeout(() => {
      api
        .request<NameAnswer>('GET', `/api/v1/manage/skill-names/${encodeURIComponent(name)}`)
        .then((answer) => current && setState(answer))
        .catch(() => undefined); // the create call still checks
    }, 300);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [name]);
  if (!name || state?.name !== name) return { taken: false, message: undefined };
  const taken = !state.available && state.reason === 'taken';
  return {
    taken,
    message: state.available ? `${name} is available` : taken ? `${name} is taken` : undefined,
  };
}
