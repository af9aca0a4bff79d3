import type { Skill } from './types';
import { Empty, Link, LoadMore, LoadState, StatusBadge, usePages } from './ui';
import { ScrollTable } from './ui-tables';

export function SkillsPage() {
  const { list, rows, more } = usePages<Skill>('/api/v1/manage/skills', { limit: 50 });
  return (
    <section aria-labelledby="skills-title">
      <div class="title-row">
        <h1 id="skills-title">Skills</h1>
        <Link to="/skills/new" class="button">
          New skill
        </Link>
      </div>
      {list.data === undefined ? (
        <LoadState load={list} what="skills" />
      ) : rows.length === 0 ? (
        <Empty>
          No skills yet. A skill is a paid API, product or service;{' '}
          <Link to="/skills/new">create your first</Link>.
        </Empty>
      ) : (
        <ScrollTable
          label="Your skills"
          columns={['Skill', 'Type', 'Status', 'Endpoints', 'Health']}
          class="striped"
        >
          {rows.map((skill) => (
            <SkillRow key={skill.skillId} skill={skill} />
          ))}
        </ScrollTable>
      )}
      <LoadMore load={list} onMore={more} />
    </section>
  );
}

/** A skill with its status (and why), its active endpoints and their health. */
function SkillRow(props: { skill: Skill }) {
  const { skill } = props;
  const active = skill.endpoints.filter((e) => e.active);
  const unhealthy = active.filter((e) => !e.isHealthy).length;
  return (
    <tr>
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
      <td>{active.length === 0 ? '—' : unhealthy ? `${unhealthy} unhealthy` : 'all healthy'}</td>
    </tr>
  );
}
