/**
 * The deployment descriptions (docker-compose.yml, k8s/) describe the system deploy/routes.json
 * describes: every service, its port, probes, secrets, and the same public routes.
 *
 *   npx jest deploy/test/deploy-descriptions
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import {
  buildIngress,
  INGRESS_PATH,
  loadRoutes,
  type Route,
  renderIngressYaml,
} from '../scripts/gen-ingress';

const ROOT = path.join(__dirname, '../..');
const DEPLOY_DIR = path.join(ROOT, 'deploy');
const K8S_BASE = path.join(ROOT, 'k8s/base');
const K8S_PRODUCTION = path.join(ROOT, 'k8s/overlays/production');

const table = loadRoutes();
const SERVICES = Object.keys(table.services);

/** Each service's Postgres schema (config.ts default) and the secrets only it holds. */
const SERVICE_FACTS: Record<string, { schema: string; secrets: string[] }> = {
  registry: { schema: 'registry', secrets: ['SESSION_SECRET', 'SECRETS_ENCRYPTION_KEY'] },
  'gateway-proxy': {
    schema: 'gateway',
    secrets: ['TICKET_SIGNING_KEY', 'TICKET_KEY_ENCRYPTION_KEY', 'RECEIPT_SIGNING_KEY'],
  },
  checkout: { schema: 'checkout', secrets: [] },
  'chain-indexer': { schema: 'indexer', secrets: [] },
  'escrow-ledger': { schema: 'ledger', secrets: [] },
  settlement: {
    schema: 'settlement',
    secrets: [
      'ESCROW_PRIVATE_KEY',
      'CHECKOUT_ESCROW_PRIVATE_KEY',
      'CHECKOUT_DEPOSIT_XPRV',
      'RELAYER_PRIVATE_KEY',
    ],
  },
  notifier: { schema: 'notifier', secrets: [] },
};
/** The services with operator routes: they read the one shared OPERATOR_TOKEN (Secret paygate-operator). */
const OPERATOR_SERVICES = ['registry', 'checkout', 'escrow-ledger', 'settlement'];
const ALL_SECRETS = Object.values(SERVICE_FACTS).flatMap((f) => f.secrets);

type Obj = Record<string, any>;

function portOf(service: string): number {
  return table.services[service]!.port;
}

describe('route table', () => {
  it('has facts for exactly the services it routes to', () => {
    expect(Object.keys(SERVICE_FACTS).sort()).toEqual([...SERVICES].sort());
  });
});

describe('docker-compose.yml', () => {
  const composePath = path.join(ROOT, 'docker-compose.yml');
  // YAML 1.1 merge keys (<<: *anchor), as docker-compose itself reads them.
  const compose = parse(readFileSync(composePath, 'utf8'), { merge: true }) as Obj;
  const services = compose.services as Record<string, Obj>;

  it('declares every routed service plus postgres, nats, anvil and edge, each with a healthcheck', () => {
    for (const name of [...SERVICES, 'postgres', 'nats', 'anvil', 'edge']) {
      expect(services[name]).toBeDefined();
      const test = services[name]!.healthcheck?.test;
      expect(Array.isArray(test) ? test.length : String(test ?? '').length).toBeGreaterThan(0);
    }
  });

  it('runs postgres 16, nats 2.9 with JetStream, and the chain image', () => {
    expect(services.postgres!.image).toBe('postgres:16');
    expect(JSON.stringify(services.postgres!.healthcheck.test)).toContain('pg_isready');
    expect(services.nats!.image).toMatch(/^nats:2\.9(\b|-)/);
    expect(services.nats!.command).toContain('-js');
    expect(JSON.stringify(services.nats!.healthcheck.test)).toContain(':8222/healthz');
    expect(services.anvil!.build.target).toBe('chain');
    expect(services.anvil!.command.join(' ')).toMatch(/^node deploy\/dist\/chain\/start-local-chain\.js\b/);
    // anvil must listen on all interfaces for the services to reach it as anvil:8545.
    expect(services.anvil!.environment.ANVIL_HOST).toBe('0.0.0.0');
  });

  it.each(SERVICES)(
    '%s: runtime image, its port and schema, /readyz healthcheck, waits for infra',
    (name) => {
      const svc = services[name]!;
      const env = svc.environment as Record<string, string>;
      expect(svc.build.target).toBe('runtime');
      expect(env.SERVICE).toBe(name);
      expect(env.PORT).toBe(String(portOf(name)));
      expect(env.DB_SCHEMA).toBe(SERVICE_FACTS[name]!.schema);
      for (const key of [
        'DATABASE_URL',
        'NATS_URL',
        'CHAIN_RPC_URL',
        'CHAIN_NETWORK',
        'USDC_ADDRESS',
        'ESCROW_ADDRESS',
      ]) {
        expect(env[key]).toBeTruthy();
      }
      for (const secret of ALL_SECRETS) {
        if (SERVICE_FACTS[name]!.secrets.includes(secret)) expect(env[secret]).toBeTruthy();
        else expect(env[secret]).toBeUndefined();
      }
      expect(JSON.stringify(svc.healthcheck.test)).toContain(`:${portOf(name)}/readyz`);
      for (const dep of ['postgres', 'nats', 'anvil']) {
        expect(svc.depends_on?.[dep]?.condition).toBe('service_healthy');
      }
    },
  );

  it('sets CONFIRMATIONS once for every service, in development mode (the image defaults to production)', () => {
    for (const name of SERVICES) {
      const env = services[name]!.environment as Record<string, string>;
      expect({ name, confirmations: env.CONFIRMATIONS, nodeEnv: env.NODE_ENV }).toEqual({
        name,
        confirmations: compose['x-env'].CONFIRMATIONS,
        nodeEnv: compose['x-env'].NODE_ENV,
      });
    }
    expect(compose['x-env'].NODE_ENV).toMatch(/development\}?$/);
  });

  it('edge runs the compiled deploy/dev/edge.ts on 8080 once every service is healthy', () => {
    const edge = services.edge!;
    expect(edge.command.join(' ')).toBe('node deploy/dist/edge/edge.js');
    expect(edge.ports.some((p: string) => String(p).endsWith(':8080'))).toBe(true);
    for (const name of SERVICES) expect(edge.depends_on?.[name]?.condition).toBe('service_healthy');
  });

  it('is accepted by `docker-compose config -q`', () => {
    const probe = spawnSync('docker-compose', ['version'], { encoding: 'utf8' });
    if (probe.error) {
      throw new Error(
        'docker-compose is not installed (needed to validate docker-compose.yml): run `make deps` ' +
          '(it installs the Debian package `docker-compose`).',
      );
    }
    const result = spawnSync('docker-compose', ['-f', composePath, 'config', '-q'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`docker-compose config -q failed:\n${result.stderr}`);
  });
});

interface K8sObject {
  file: string;
  obj: Obj;
}

function loadYamlObjects(dir: string): K8sObject[] {
  const out: K8sObject[] = [];
  for (const file of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml')) {
    for (const doc of parseAllDocuments(readFileSync(path.join(dir, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj = doc.toJS() as Obj | null;
      if (obj) out.push({ file, obj });
    }
  }
  return out;
}

/**
 * kubernetes-models is ESM-only and jest runs CommonJS, so the schema validation runs in a plain
 * Node ESM child: `new Model(obj).validate()` for every object, one error string per failure.
 */
function validateWithKubernetesModels(objects: Obj[]): string[] {
  const script = `
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    const errors = [];
    for (const obj of JSON.parse(input)) {
      const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : [null, obj.apiVersion];
      const spec = 'kubernetes-models/' + (group ? group + '/' : '') + version + '/' + obj.kind;
      const id = obj.kind + '/' + (obj.metadata?.name ?? '?');
      try {
        const mod = await import(spec);
        new mod[obj.kind](obj).validate();
      } catch (err) {
        errors.push(id + ': ' + (err?.message ?? String(err)));
      }
    }
    process.stdout.write(JSON.stringify(errors));
  `;
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: DEPLOY_DIR,
    input: JSON.stringify(objects),
    encoding: 'utf8',
  });
  return JSON.parse(stdout) as string[];
}

function find(objects: K8sObject[], kind: string, name: string): Obj | undefined {
  return objects.find((o) => o.obj.kind === kind && o.obj.metadata?.name === name)?.obj;
}

/** How the edge routes: routes.json order, first match wins. */
function routeByTable(routes: Route[], p: string): string | undefined {
  return routes.find((r) =>
    r.match === 'exact'
      ? p === r.path
      : r.match === 'prefix'
        ? p.startsWith(r.path)
        : new RegExp(r.path).test(p),
  )?.service;
}

/**
 * How ingress-nginx routes this Ingress: with use-regex on, every path becomes
 * `location ~* "^<path>"` (Exact included), sorted by descending path length, first match wins.
 */
function routeByNginx(ingress: Obj, p: string): string | undefined {
  const paths = [...(ingress.spec.rules[0].http.paths as Obj[])].sort(
    (a, b) => b.path.length - a.path.length,
  );
  return paths.find((x) => new RegExp(`^${x.path}`, 'i').test(p))?.backend.service.name;
}

describe('k8s/base', () => {
  const objects = loadYamlObjects(K8S_BASE);

  it('every object passes the kubernetes-models schema validation', () => {
    expect(objects.length).toBeGreaterThan(SERVICES.length * 3);
    expect(validateWithKubernetesModels(objects.map((o) => o.obj))).toEqual([]);
  });

  it('kustomization.yaml lists exactly the resource files that exist', () => {
    const kustomization = parse(readFileSync(path.join(K8S_BASE, 'kustomization.yaml'), 'utf8')) as Obj;
    const files = readdirSync(K8S_BASE).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    expect([...(kustomization.resources as string[])].sort()).toEqual(files.sort());
    expect(kustomization.namespace).toBe('paygate');
  });

  it.each(SERVICES)(
    '%s: Deployment, Service and ConfigMap with probes, resources and its secrets',
    (name) => {
      const port = portOf(name);
      const configMap = find(objects, 'ConfigMap', `${name}-config`);
      expect(configMap?.data).toMatchObject({
        SERVICE: name,
        PORT: String(port),
        DB_SCHEMA: SERVICE_FACTS[name]!.schema,
      });

      const service = find(objects, 'Service', name);
      expect(service?.spec.ports).toEqual([
        expect.objectContaining({ name: 'http', port, targetPort: 'http' }),
      ]);

      const deployment = find(objects, 'Deployment', name);
      expect(deployment).toBeDefined();
      const spec = deployment!.spec;
      expect(spec.replicas).toBe(2);
      expect(service!.spec.selector).toEqual(spec.selector.matchLabels);
      expect(spec.template.metadata.labels).toMatchObject(spec.selector.matchLabels);
      expect(spec.template.metadata.annotations).toMatchObject({
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': String(port),
        'prometheus.io/path': '/metrics',
      });
      expect(spec.template.spec.securityContext.runAsNonRoot).toBe(true);

      const containers = spec.template.spec.containers as Obj[];
      expect(containers).toHaveLength(1);
      const c = containers[0]!;
      expect(c.ports).toEqual([expect.objectContaining({ name: 'http', containerPort: port })]);
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      for (const kind of ['requests', 'limits']) {
        expect(c.resources[kind].cpu).toBeTruthy();
        expect(c.resources[kind].memory).toBeTruthy();
      }
      expect(c.securityContext.allowPrivilegeEscalation).toBe(false);

      const configMaps = (c.envFrom as Obj[]).map((e) => e.configMapRef?.name);
      expect(configMaps).toEqual(expect.arrayContaining(['paygate-common', `${name}-config`]));
      for (const cm of configMaps) expect(find(objects, 'ConfigMap', cm)).toBeDefined();

      const env = c.env as Obj[];
      const secretRefs = env.filter((e) => e.valueFrom?.secretKeyRef);
      const serviceSecrets = secretRefs.filter((e) => ALL_SECRETS.includes(e.name));
      expect(serviceSecrets.map((e) => e.name).sort()).toEqual([...SERVICE_FACTS[name]!.secrets].sort());
      for (const e of serviceSecrets) {
        expect(e.valueFrom.secretKeyRef).toEqual({ name: `${name}-secrets`, key: e.name });
      }
      // Its own NATS user, never another service's (deploy/scripts/nats-auth.ts makes the Secrets).
      const natsRefs = secretRefs.filter((e) => ['NATS_USER', 'NATS_PASSWORD'].includes(e.name));
      expect(natsRefs.map((e) => e.valueFrom.secretKeyRef)).toEqual([
        { name: `paygate-nats-${name}`, key: 'NATS_USER' },
        { name: `paygate-nats-${name}`, key: 'NATS_PASSWORD' },
      ]);
      // Only the CA certificate of NATS's TLS certificate, at the path paygate-common's NATS_CA_FILE names.
      const natsCa = (spec.template.spec.volumes as Obj[]).find((v) => v.name === 'nats-ca');
      expect(natsCa?.secret).toEqual({
        secretName: 'nats-server-tls',
        items: [{ key: 'ca.crt', path: 'ca.crt' }],
      });
      expect((c.volumeMounts as Obj[]).find((m) => m.name === 'nats-ca')?.mountPath).toBe(
        '/etc/paygate/nats-ca',
      );
      // Its own Postgres role, never another service's.
      const dbSecrets = new Set(
        secretRefs
          .filter(
            (e) =>
              !ALL_SECRETS.includes(e.name) &&
              e.name !== 'OPERATOR_TOKEN' &&
              !['NATS_USER', 'NATS_PASSWORD'].includes(e.name),
          )
          .map((e) => e.valueFrom.secretKeyRef.name),
      );
      expect([...dbSecrets]).toEqual([`paygate-db-${SERVICE_FACTS[name]!.schema}`]);
      expect(env.find((e) => e.name === 'DATABASE_URL')?.value).toBeTruthy();
    },
  );

  it('NATS: TLS with the mounted CA, and a NetworkPolicy that lets only the seven services reach its client port', () => {
    expect(find(objects, 'ConfigMap', 'paygate-common')!.data).toMatchObject({
      NATS_URL: expect.stringMatching(/^tls:\/\//),
      NATS_CA_FILE: '/etc/paygate/nats-ca/ca.crt',
    });
    const policy = find(objects, 'NetworkPolicy', 'nats')!;
    expect(policy.spec.podSelector.matchLabels).toMatchObject({ 'app.kubernetes.io/name': 'nats' });
    const clientRule = (policy.spec.ingress as Obj[]).find((rule) =>
      (rule.ports as Obj[]).some((p) => p.port === 4222),
    )!;
    const services = clientRule.from[0].podSelector.matchExpressions.find(
      (e: Obj) => e.key === 'app.kubernetes.io/name',
    );
    expect([...services.values].sort()).toEqual([...SERVICES].sort());
    // No rule opens the client port to a namespace or to every pod.
    for (const rule of policy.spec.ingress as Obj[]) {
      if (!(rule.ports as Obj[]).some((p) => p.port === 4222)) continue;
      for (const peer of rule.from as Obj[]) {
        expect(peer.namespaceSelector).toBeUndefined();
        expect(peer.ipBlock).toBeUndefined();
        expect(Object.keys(peer.podSelector ?? {}).length).toBeGreaterThan(0);
      }
    }
  });

  it('the operator token is one Secret, read by exactly the services with operator routes', () => {
    for (const name of SERVICES) {
      const env = find(objects, 'Deployment', name)!.spec.template.spec.containers[0].env as Obj[];
      const token = env.find((e) => e.name === 'OPERATOR_TOKEN');
      if (OPERATOR_SERVICES.includes(name))
        expect(token?.valueFrom?.secretKeyRef).toEqual({ name: 'paygate-operator', key: 'OPERATOR_TOKEN' });
      else expect(token).toBeUndefined();
    }
  });

  it('CONFIRMATIONS is set once, in paygate-common, with NODE_ENV=production: no per-service override', () => {
    const common = find(objects, 'ConfigMap', 'paygate-common')!;
    expect(common.data).toMatchObject({
      NODE_ENV: 'production',
      CONFIRMATIONS: expect.stringMatching(/^[1-9]\d*$/),
    });
    for (const { obj } of objects) {
      if (obj.kind === 'ConfigMap' && obj.metadata.name !== 'paygate-common')
        expect({ configMap: obj.metadata.name, data: obj.data }).not.toEqual(
          expect.objectContaining({ data: expect.objectContaining({ CONFIRMATIONS: expect.anything() }) }),
        );
      for (const c of (obj.spec?.template?.spec?.containers ?? []) as Obj[])
        expect((c.env ?? []).map((e: Obj) => e.name)).not.toContain('CONFIRMATIONS');
    }
  });

  it('ingress.yaml is exactly what gen-ingress produces from deploy/routes.json', () => {
    expect(readFileSync(INGRESS_PATH, 'utf8')).toBe(renderIngressYaml(table));
    const ingress = find(objects, 'Ingress', 'paygate');
    expect(ingress?.spec).toEqual(buildIngress(table).spec);
    expect(ingress?.spec.ingressClassName).toBe('nginx');
    expect(ingress?.metadata.annotations['nginx.ingress.kubernetes.io/use-regex']).toBe('true');
  });

  it('ingress rules mirror the route table, entry for entry', () => {
    const ingress = find(objects, 'Ingress', 'paygate')!;
    const paths = ingress.spec.rules[0].http.paths as Obj[];
    const pathType = { exact: 'Exact', prefix: 'Prefix', regex: 'ImplementationSpecific' } as const;
    expect(paths).toHaveLength(table.routes.length);
    table.routes.forEach((route, i) => {
      const p = paths[i]!;
      expect(p.pathType).toBe(pathType[route.match]);
      expect(p.path).toBe(route.match === 'regex' ? route.path.replace(/^\^/, '') : route.path);
      // Kubernetes rejects non-absolute paths of any pathType.
      expect(p.path.startsWith('/')).toBe(true);
      expect(p.backend.service.name).toBe(route.service);
      const svc = find(objects, 'Service', route.service);
      expect(svc?.spec.ports.map((x: Obj) => x.name)).toContain(p.backend.service.port.name);
    });
  });

  it('ingress-nginx (length-sorted regex locations) routes like the edge (route-table order)', () => {
    const ingress = find(objects, 'Ingress', 'paygate')!;
    const samples = new Set<string>([
      '/api/v1/skills/weather-api/SKILL.md',
      '/api/v1/skills/weather-api/forecast',
      '/api/v1/skills/weather-api/SKILL.md/extra',
      '/api/v1/skills/weather-api',
    ]);
    for (const r of table.routes) {
      if (r.match === 'regex') continue;
      samples.add(r.path);
      if (r.match === 'prefix') {
        samples.add(`${r.path}x`);
        samples.add(`${r.path}/a/b`);
      }
    }
    const mismatches = [...samples]
      .map((p) => ({ p, edge: routeByTable(table.routes, p), nginx: routeByNginx(ingress, p) }))
      .filter((m) => m.edge !== undefined && m.edge !== m.nginx);
    expect(mismatches).toEqual([]);
  });
});

describe('k8s/overlays/production', () => {
  const kustomization = parse(readFileSync(path.join(K8S_PRODUCTION, 'kustomization.yaml'), 'utf8')) as Obj;

  it('builds on the base, pins the image and names only existing files and objects', () => {
    expect(kustomization.resources).toContain('../../base');
    for (const r of kustomization.resources as string[])
      expect(existsSync(path.join(K8S_PRODUCTION, r))).toBe(true);
    for (const p of kustomization.patches as Obj[]) {
      if (p.path) expect(existsSync(path.join(K8S_PRODUCTION, p.path))).toBe(true);
    }
    expect(kustomization.images).toEqual([
      expect.objectContaining({ name: 'paygate', newTag: expect.any(String) }),
    ]);
    const replicaNames = (kustomization.replicas as Obj[]).map((r) => r.name).sort();
    expect(replicaNames).toEqual([...SERVICES].sort());
  });

  it('patch files validate as their kinds', () => {
    const objects = loadYamlObjects(K8S_PRODUCTION);
    expect(validateWithKubernetesModels(objects.map((o) => o.obj))).toEqual([]);
  });
});
