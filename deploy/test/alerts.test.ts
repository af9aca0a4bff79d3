/**
 * The alerts and the dashboard an on-call engineer gets (k8s/monitoring): promtool checks the rules and runs their
 * unit tests (each alert fires on what must wake someone and stays quiet otherwise), the PrometheusRule the cluster
 * gets is exactly the rule file, every metric a rule or a panel reads is one a service exports, every alert has a
 * runbook in docs/operations.md, and the autoscalers scale only the services that may run any number of replicas.
 *
 *   jest deploy/test/alerts.test.ts
 *   WRITE_PROMETHEUS_RULE=1 jest deploy/test/alerts.test.ts     # after editing alerts.rules.yaml
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';

const ROOT = path.join(__dirname, '../..');
const MONITORING = path.join(ROOT, 'k8s/monitoring');
const RULES_PATH = path.join(MONITORING, 'alerts.rules.yaml');
const RULES_TEST_PATH = path.join(MONITORING, 'alerts.test.yaml');
const PROMETHEUS_RULE_PATH = path.join(MONITORING, 'prometheus-rule.yaml');
const DASHBOARD_PATH = path.join(MONITORING, 'grafana-dashboard.json');
const OPERATIONS_PATH = path.join(ROOT, 'docs/operations.md');
const PROMTOOL_TIMEOUT_MS = 60_000;

type Obj = Record<string, any>;

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const rulesText = readFileSync(RULES_PATH, 'utf8');
const ruleGroups = (parse(rulesText) as { groups: Array<{ name: string; rules: Rule[] }> }).groups;
const alerts = ruleGroups.flatMap((group) => group.rules).filter((rule) => rule.alert);

/** The PrometheusRule object the cluster gets: the rule file's groups, as they are, under spec. */
function renderPrometheusRule(text: string): string {
  const header = [
    '# GENERATED from alerts.rules.yaml (the source; promtool tests it): do not edit by hand. Regenerate with',
    '#   WRITE_PROMETHEUS_RULE=1 jest deploy/test/alerts.test.ts',
    '# Loaded by the Prometheus Operator: the release label is what kube-prometheus-stack selects by default.',
  ].join('\n');
  const object = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: {
      name: 'paygate',
      labels: { 'app.kubernetes.io/name': 'paygate', release: 'kube-prometheus-stack' },
    },
    spec: { groups: (parse(text) as Obj).groups },
  };
  return `${header}\n${stringify(object, { lineWidth: 0 })}`;
}

function promtool(args: string[], cwd = MONITORING) {
  const run = spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: PROMTOOL_TIMEOUT_MS });
  if (run.error) {
    throw new Error(
      `promtool could not run (${run.error.message}): install it with make system-deps (Debian package prometheus)`,
    );
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** Metric names a PromQL expression reads: its identifiers outside strings, label matchers, groupings and ranges. */
function metricNamesIn(expr: string): string[] {
  const keywords = new Set([
    'by',
    'without',
    'on',
    'ignoring',
    'group_left',
    'group_right',
    'offset',
    'bool',
    'and',
    'or',
    'unless',
    'inf',
    'nan',
  ]);
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\boffset\s+\w+/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (call || keywords.has(name!.toLowerCase())) continue;
    names.add(name!);
  }
  return [...names];
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every metric the services register (`new Gauge|Counter|Histogram|Summary({ name: '…' })` in their src). */
function exportedMetrics(): Set<string> {
  const names = new Set<string>();
  for (const parent of ['services', 'libs']) {
    for (const pkg of readdirSync(path.join(ROOT, parent))) {
      const src = path.join(ROOT, parent, pkg, 'src');
      let files: string[];
      try {
        files = sourceFiles(src);
      } catch {
        continue;
      }
      for (const file of files) {
        const text = readFileSync(file, 'utf8');
        for (const m of text.matchAll(
          // A metric's constructor, or a one-argument factory over it (the ledger's `gauge(name, help)`).
          /(?:new (?:Gauge|Counter|Histogram|Summary)\(\{\s*name:\s*|\b(?:gauge|counter)\(\s*)'([a-z_:][a-z0-9_:]*)'/g,
        ))
          names.add(m[1]!);
      }
    }
  }
  return names;
}

/** Whether `name` is exported: a registered metric, a histogram's series, prom-client's defaults, or Prometheus's `up`. */
function isExported(name: string, exported: Set<string>): boolean {
  if (name === 'up') return true;
  // prom-client's collectDefaultMetrics (libs/runtime metrics.ts): process_* and nodejs_*.
  if (/^(process|nodejs)_/.test(name)) return true;
  const base = name.replace(/_(bucket|count|sum)$/, '');
  return exported.has(name) || exported.has(base);
}

function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as Obj;
  const panels = (dashboard.panels as Obj[]).flatMap((p) => [p, ...((p.panels as Obj[]) ?? [])]);
  return panels.flatMap((p) => ((p.targets as Obj[]) ?? []).map((t) => String(t.expr)));
}

/** GitHub's anchor of a markdown heading. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');
}

describe('alert rules (promtool)', () => {
  it('pass promtool check rules', () => {
    const run = promtool(['check', 'rules', RULES_PATH]);
    expect({ status: run.status, output: run.output }).toEqual({ status: 0, output: expect.any(String) });
  });

  it('pass their promtool unit tests', () => {
    const run = promtool(['test', 'rules', RULES_TEST_PATH]);
    if (run.status !== 0) throw new Error(`promtool test rules failed:\n${run.output}`);
    expect(run.output).toContain('SUCCESS');
  });

  it('have, each, a case where they fire and one where they stay quiet', () => {
    const tests = (parse(readFileSync(RULES_TEST_PATH, 'utf8')) as Obj).tests as Obj[];
    const cases = tests.flatMap((t) => (t.alert_rule_test as Obj[]) ?? []);
    const coverage = alerts.map((rule) => ({
      alert: rule.alert,
      fires: cases.some((c) => c.alertname === rule.alert && (c.exp_alerts ?? []).length > 0),
      quiet: cases.some((c) => c.alertname === rule.alert && (c.exp_alerts ?? []).length === 0),
    }));
    expect(coverage.filter((c) => !c.fires || !c.quiet)).toEqual([]);
    expect(alerts.length).toBeGreaterThanOrEqual(20);
  });

  it('have, each, a severity and a runbook section in docs/operations.md', () => {
    const anchors = new Set(
      readFileSync(OPERATIONS_PATH, 'utf8')
        .split('\n')
        .filter((line) => /^#{2,4} /.test(line))
        .map((line) => anchorOf(line.replace(/^#+ /, ''))),
    );
    const problems = alerts.flatMap((rule) => {
      const out: string[] = [];
      if (!['critical', 'warning'].includes(rule.labels?.severity ?? '')) out.push(`${rule.alert}: severity`);
      const runbook = rule.annotations?.runbook_url ?? '';
      const anchor = runbook.replace(/^docs\/operations\.md#/, '');
      if (anchor === runbook || !anchors.has(anchor)) out.push(`${rule.alert}: runbook ${runbook}`);
      if (!rule.annotations?.summary) out.push(`${rule.alert}: summary`);
      return out;
    });
    expect(problems).toEqual([]);
  });

  it('read only metrics the services export', () => {
    const exported = exportedMetrics();
    const missing = alerts.flatMap((rule) =>
      metricNamesIn(rule.expr)
        .filter((name) => !isExported(name, exported))
        .map((name) => `${rule.alert}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it('ship as the PrometheusRule in k8s/monitoring, generated from the rule file', () => {
    const rendered = renderPrometheusRule(rulesText);
    if (process.env.WRITE_PROMETHEUS_RULE === '1') writeFileSync(PROMETHEUS_RULE_PATH, rendered);
    expect(readFileSync(PROMETHEUS_RULE_PATH, 'utf8')).toBe(rendered);
    const kustomization = parse(readFileSync(path.join(MONITORING, 'kustomization.yaml'), 'utf8')) as Obj;
    expect(kustomization.resources).toEqual(
      expect.arrayContaining(['prometheus-rule.yaml', 'podmonitor.yaml']),
    );
    expect(kustomization.namespace).toBe('paygate');
    const production = parse(
      readFileSync(path.join(ROOT, 'k8s/overlays/production/kustomization.yaml'), 'utf8'),
    ) as Obj;
    expect(production.resources).toContain('../../monitoring');
  });

  it('scrape every service with job = its name, as `up{job=...}` in the rules expects', () => {
    const podMonitor = parse(readFileSync(path.join(MONITORING, 'podmonitor.yaml'), 'utf8')) as Obj;
    expect(podMonitor.kind).toBe('PodMonitor');
    expect(podMonitor.spec.jobLabel).toBe('app.kubernetes.io/name');
    expect(podMonitor.spec.podMetricsEndpoints).toEqual([
      expect.objectContaining({ port: 'http', path: '/metrics' }),
    ]);
    const selector = podMonitor.spec.selector.matchLabels as Record<string, string>;
    const services = JSON.parse(readFileSync(path.join(ROOT, 'deploy/routes.json'), 'utf8')).services as Obj;
    for (const name of Object.keys(services)) {
      const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'k8s/base', `${name}.yaml`), 'utf8'));
      const deployment = docs.map((d) => d.toJS() as Obj).find((o) => o?.kind === 'Deployment')!;
      expect(deployment.spec.template.metadata.labels).toMatchObject(selector);
      expect(rulesText).toContain(name);
    }
  });
});

describe('grafana dashboard', () => {
  const exprs = dashboardExprs();

  it('has the money and latency panels', () => {
    const all = exprs.join('\n');
    for (const metric of [
      'ledger_reconciliation_differences',
      'ledger_escrow_chain_balance_micro_usdc',
      'ledger_escrow_ledger_balance_micro_usdc',
      'ledger_sellers_owed_micro_usdc',
      'settlement_transfers_pending',
      'settlement_gas_balance_wei',
      'http_request_duration_seconds_bucket',
    ])
      expect(all).toContain(metric);
    expect(all).toMatch(/histogram_quantile\(0\.5,/);
    expect(all).toMatch(/histogram_quantile\(0\.99,/);
  });

  it('reads only metrics the services export', () => {
    const exported = exportedMetrics();
    const missing = exprs.flatMap((expr) =>
      metricNamesIn(expr)
        .filter((name) => !isExported(name, exported))
        .map((name) => `${name} in ${expr}`),
    );
    expect(missing).toEqual([]);
  });

  it('has only expressions promtool parses', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'paygate-dashboard-'));
    try {
      const file = path.join(dir, 'dashboard.rules.yaml');
      writeFileSync(
        file,
        stringify({
          groups: [
            { name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:panel_${i}`, expr })) },
          ],
        }),
      );
      const run = promtool(['check', 'rules', file], dir);
      if (run.status !== 0) throw new Error(`promtool check rules failed on the dashboard:\n${run.output}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('metric names in expressions', () => {
  it('are found outside label matchers, groupings, ranges and function calls', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, service) (rate(http_request_duration_seconds_bucket{route="/a:b", status=~"2.."}[5m]))) > 2.5 or absent(up offset 5m) and on(x) foo_total',
      ).sort(),
    ).toEqual(['foo_total', 'http_request_duration_seconds_bucket', 'up']);
    expect(
      metricNamesIn('time() - max(ledger_reconciliation_last_success_timestamp_seconds) > 1200'),
    ).toEqual(['ledger_reconciliation_last_success_timestamp_seconds']);
  });
});

describe('autoscaling (k8s/base/autoscaling.yaml)', () => {
  const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'k8s/base/autoscaling.yaml'), 'utf8'))
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
  const production = parse(
    readFileSync(path.join(ROOT, 'k8s/overlays/production/kustomization.yaml'), 'utf8'),
  ) as Obj;

  it('scales the services that run any number of replicas, never the leader-elected or single-signer ones', () => {
    const names = docs.map((d) => d.metadata.name).sort();
    expect(names).toEqual(['checkout', 'escrow-ledger', 'gateway-proxy', 'notifier', 'registry']);
    for (const hpa of docs) {
      expect(hpa.kind).toBe('HorizontalPodAutoscaler');
      expect(hpa.spec.scaleTargetRef).toEqual({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: hpa.metadata.name,
      });
      const deployment = parseAllDocuments(
        readFileSync(path.join(ROOT, 'k8s/base', `${hpa.metadata.name}.yaml`), 'utf8'),
      )
        .map((d) => d.toJS() as Obj)
        .find((o) => o?.kind === 'Deployment')!;
      // The HPA's floor is the Deployment's count, so an apply never leaves fewer than the manifest says.
      expect(hpa.spec.minReplicas).toBe(deployment.spec.replicas);
      expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
      // CPU utilisation needs the container's CPU request.
      expect(deployment.spec.template.spec.containers[0].resources.requests.cpu).toBeTruthy();
    }
  });

  it('starts from the production replicas in the production overlay', () => {
    const replicas = Object.fromEntries(
      (production.replicas as Obj[]).map((r) => [r.name as string, r.count as number]),
    );
    for (const hpa of docs) {
      const patch = (production.patches as Obj[]).find(
        (p) => p.target?.kind === 'HorizontalPodAutoscaler' && p.target?.name === hpa.metadata.name,
      );
      expect(patch).toBeDefined();
      const ops = parse(patch!.patch as string) as Obj[];
      expect(ops.find((op) => op.path === '/spec/minReplicas')?.value).toBe(replicas[hpa.metadata.name]);
    }
  });
});
