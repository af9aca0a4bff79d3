/**
 * CPU by process during a load run, from /proc (Linux): each named process's user + system time, with the time of
 * the children it reaped, and for a process measured with its children (the postmaster: a pooled backend lives the
 * whole run, so it is never reaped) each child's own. Beside them, the whole machine's busy time from /proc/stat:
 * what the named processes do not account for is the kernel's and other processes' share.
 */
import { readFileSync } from 'node:fs';
import { childPids } from '../chaos/postgres';

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

/** The machine's busy and total CPU ms so far (every core), from the first line of /proc/stat. */
function machineCpuMs(): { busy: number; total: number } {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = ticks.map(Number) as number[];
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { busy: busy * TICK_MS, total: (busy + idle! + iowait!) * TICK_MS };
}

export interface CpuShare {
  process: string;
  cpuSeconds: number;
  /** Share of one core over the window (1 = a whole core). */
  cores: number;
}

export interface NamedProcess {
  name: string;
  pid: number | undefined;
  /** Count the process's live children too (each their own time). */
  withChildren?: boolean;
}

const pidsOf = ({ pid, withChildren }: NamedProcess): number[] =>
  pid ? [pid, ...(withChildren ? childPids(pid) : [])] : [];

/**
 * Measures the named processes from now until `stop()`; a process replaced meanwhile is counted from its start.
 * `stop()` ends the list with the machine's busy time that no named process accounts for.
 */
export function measureCpu(named: () => NamedProcess[]): { stop(): CpuShare[] } {
  const started = performance.now();
  const machineAtStart = machineCpuMs();
  const atStart = new Map<number, number>();
  for (const entry of named()) for (const pid of pidsOf(entry)) atStart.set(pid, processCpuMs(pid) ?? 0);
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const machine = machineCpuMs();
      const byName = new Map<string, number>();
      for (const entry of named()) {
        for (const pid of pidsOf(entry)) {
          const used = (processCpuMs(pid) ?? 0) - (atStart.get(pid) ?? 0);
          byName.set(entry.name, (byName.get(entry.name) ?? 0) + used / 1000);
        }
      }
      const attributed = [...byName.values()].reduce((sum, s) => sum + s, 0);
      const share = (process: string, cpuSeconds: number): CpuShare => ({
        process,
        cpuSeconds: Math.round(cpuSeconds * 10) / 10,
        cores: Math.round((cpuSeconds / seconds) * 100) / 100,
      });
      const busySeconds = (machine.busy - machineAtStart.busy) / 1000;
      const idleShare = 1 - (machine.busy - machineAtStart.busy) / (machine.total - machineAtStart.total);
      return [
        ...[...byName.entries()]
          .map(([process, s]) => share(process, s))
          .sort((a, b) => b.cpuSeconds - a.cpuSeconds),
        share('the kernel and everything not named above', Math.max(0, busySeconds - attributed)),
        share(`whole machine (idle ${Math.round(idleShare * 100)}%)`, busySeconds),
      ];
    },
  };
}
