/**
 * The NATS users of k8s: the Secrets deploy/scripts/nats-auth.ts generates are what the helm values mount and
 * include, and nats-server 2.9 accepts the included authorization block. (What the users may do is tested on a
 * real server in libs/bus/test/permissions.test.ts and deploy/test/nats-authorization.test.ts.)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findNatsServerBinary, generateNatsPasswords } from '@paygate/bus';
import { parse } from 'yaml';
import routeTable from '../routes.json';
import { natsAuthSecrets } from '../scripts/nats-auth';

const ROOT = path.join(__dirname, '../..');
type Obj = Record<string, any>;

describe('k8s NATS users (deploy/scripts/nats-auth.ts, k8s/infra/nats-values.yaml)', () => {
  const passwords = generateNatsPasswords();
  const secrets = natsAuthSecrets({ namespace: 'paygate', eventNamespace: 'paygate', passwords }) as Obj[];

  it('makes one Secret per service with its user, one for the admin, and the server’s auth.conf', () => {
    const names = secrets.map((s) => s.metadata.name).sort();
    expect(names).toEqual(
      [
        'nats-auth',
        'paygate-nats-admin',
        ...Object.keys(routeTable.services).map((service) => `paygate-nats-${service}`),
      ].sort(),
    );
    for (const service of Object.keys(routeTable.services)) {
      const secret = secrets.find((s) => s.metadata.name === `paygate-nats-${service}`)!;
      expect(secret.stringData).toEqual({
        NATS_USER: service,
        NATS_PASSWORD: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    }
  });

  it('the helm values include auth.conf from where they mount the nats-auth Secret, and enable TLS', () => {
    const values = parse(readFileSync(path.join(ROOT, 'k8s/infra/nats-values.yaml'), 'utf8')) as Obj;
    const include = values.config.merge['00$include'] as string;
    const mount = values.container.patch.find((p: Obj) => p.value?.name === 'nats-auth').value;
    // The chart writes nats.conf to /etc/nats-config; include paths are relative to it.
    expect(path.posix.resolve('/etc/nats-config', include)).toBe(
      path.posix.join(mount.mountPath, 'auth.conf'),
    );
    expect(values.podTemplate.patch[0].value.secret.secretName).toBe('nats-auth');
    expect(values.config.nats.tls).toEqual({ enabled: true, secretName: 'nats-server-tls' });
  });

  it('nats-server 2.9 accepts the generated auth.conf as an include', () => {
    const binary = findNatsServerBinary();
    if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-nats-auth-'));
    try {
      writeFileSync(
        path.join(dir, 'auth.conf'),
        secrets.find((s) => s.metadata.name === 'nats-auth')!.stringData['auth.conf'],
      );
      writeFileSync(
        path.join(dir, 'nats.conf'),
        `port: -1\njetstream { store_dir: ${JSON.stringify(path.join(dir, 'js'))} }\ninclude ./auth.conf\n`,
      );
      const check = spawnSync(binary, ['-c', path.join(dir, 'nats.conf'), '-t'], { encoding: 'utf8' });
      expect(`${check.stdout}${check.stderr}`).toContain('is valid');
      expect(check.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
