import { useState } from 'preact/hooks';
import { useDashboard } from './context';
import type { Page, Skill } from './types';
import { Empty, Link, LoadMore, LoadState, StatusBadge, useLoad } from './ui';
import { ScrollTable } from './ui-tables';

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
        <LoadState load={list} what="skills" />
      ) : pages.length === 0 ? (
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
          {pages.map((skill) => (
            <SkillRow key={skill.skillId} skill={skill} />
          ))}
        </ScrollTable>
      )}
      <LoadMore load={list} onMore={setCursor} />
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
