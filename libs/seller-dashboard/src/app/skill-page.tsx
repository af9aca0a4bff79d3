import { useDashboard } from './context';
import { AddEndpoint, EndpointCard } from './skill-endpoints';
import { SkillMd } from './skill-md';
import type { Skill } from './types';
import { ActionNotes, Empty, Facts, Link, LoadState, StatusBadge, useAction, useGet } from './ui';

export function SkillPage(props: { name: string }) {
  const { api } = useDashboard();
  // Live: validation, health and status change while the page is open.
  const loaded = useGet<Skill>(`/api/v1/manage/skills/${props.name}`, { live: true });
  const { data: skill, set: setSkill } = loaded;
  const action = useAction();
  if (!skill) return <LoadState load={loaded} what="the skill" />;
  const act = async (path: string, message: string) => {
    const updated = await action.run(() =>
      api.request<Skill>('POST', `/api/v1/manage/skills/${skill.name}/${path}`),
    );
    if (!updated) return;
    setSkill(updated);
    action.setNotice(message);
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
      <ActionNotes action={action} />
      <SkillFacts skill={skill} />
      <SkillActions skill={skill} busy={action.busy} onRefresh={() => loaded.reload()} act={act} />
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

function SkillFacts(props: { skill: Skill }) {
  const { skill } = props;
  return (
    <Facts
      facts={[
        ['Name', <code key="n">{skill.name}</code>],
        ['Type · mode', `${skill.type} · ${skill.mode}`],
        ['API base URL', <code key="u">{skill.apiBaseUrl}</code>],
        ['Hold period', `${skill.holdPeriodHours} h`],
        skill.durationDays !== null && ['Access duration', `${skill.durationDays} days`],
        skill.requiresShipping !== null && ['Shipping', skill.requiresShipping ? 'required' : 'not required'],
        ['Categories', skill.categories.join(', ') || '—'],
        ['Description', skill.description],
      ]}
    />
  );
}

/** Edit, refresh, validate again (after a failed validation) and archive (final, asked first). */
function SkillActions(props: {
  skill: Skill;
  busy: boolean;
  onRefresh: () => void;
  act: (path: string, message: string) => Promise<void>;
}) {
  const { skill } = props;
  return (
    <div class="actions">
      <Link to={`/skills/${skill.name}/edit`} class="button outline">
        Edit details
      </Link>
      <button type="button" class="outline" onClick={props.onRefresh}>
        Refresh status
      </button>
      {skill.status === 'VALIDATION_FAILED' && (
        <button
          type="button"
          onClick={() => props.act('validate', 'Validation started again.')}
          disabled={props.busy}
        >
          Validate again
        </button>
      )}
      {skill.status !== 'ARCHIVED' && skill.status !== 'SUSPENDED' && (
        <button
          type="button"
          class="outline contrast"
          disabled={props.busy}
          onClick={() => {
            if (
              window.confirm(
                `Archive ${skill.name}? This is final: it stops selling and its name stays taken.`,
              )
            )
              void props.act('archive', 'The skill is archived.');
          }}
        >
          Archive
        </button>
      )}
    </div>
  );
}
