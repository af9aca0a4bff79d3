/**
 * CPU by process during a load run, from /proc (Linux): each named process's user + system time, with the time of
 * the children it reaped (Postgres' backends come and go; the postmaster's count holds the ones that exited).
 */
import { readFileSync } from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU ms a process has used so far, its reaped children's included; undefined once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the last ')': a process name may hold one. utime, stime, cutime, cstime are fields 11-14 from the state.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_MS;
  } catch {
    return undefined;
  }
}

export interface CpuShare {
  process: string;
  cpuSeconds: number;
  /** Share of one core over the window (1 = a whole core). */
  cores: number;
}

/** Measures the named processes from now until `stop()`; a process replaced meanwhile is counted from its start. */
export function measureCpu(named: () => Array<{ name: string; pid: number | undefined }>): {
  stop(): CpuShare[];
} {
  const started = performance.now();
  const atStart = new Map<number, number>();
  for (const { pid } of named()) if (pid) atStart.set(pid, processCpuMs(pid) ?? 0);
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const byName = new Map<string, number>();
      for (const { name, pid } of named()) {
        if (!pid) continue;
        const used = (processCpuMs(pid) ?? 0) - (atStart.get(pid) ?? 0);
        byName.set(name, (byName.get(name) ?? 0) + used / 1000);
      }
      return [...byName.entries()]
        .map(([process, cpuSeconds]) => ({
          process,
          cpuSeconds: Math.round(cpuSeconds * 10) / 10,
          cores: Math.round((cpuSeconds / seconds) * 100) / 100,
        }))
        .sort((a, b) => b.cpuSeconds - a.cpuSeconds);
    },
  };
}
