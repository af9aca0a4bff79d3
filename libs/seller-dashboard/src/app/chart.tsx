import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { formatUsdc } from '@paygate/money';
import { usd } from './format';
import { axisTop, dailyBySkill, dayLabel, type SkillSeries, tickLabel } from './overview';
import type { Transaction } from './types';

/** Distinct on white and for common colour blindness (Okabe–Ito). */
const COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9'];
const HEIGHT = 240;
const DAY_S = 86_400;

/**
 * Payments per UTC day over the last CHART_DAYS days, stacked by skill, with a legend and a text summary for screen
 * readers. The y axis scales to the largest day (a $0.05 day is visible) and the x axis has half a day of room on
 * each side (today's bar whole).
 */
export function PaymentsChart(props: { payments: Transaction[] }) {
  const box = useRef<HTMLDivElement>(null);
  const series = useMemo(() => dailyBySkill(props.payments, new Date()), [props.payments]);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const width = () => Math.max(260, element.clientWidth);
    const { data, largest } = stackedData(series);
    const plot = new uPlot(plotOptions(series, largest, width()), data, element);
    const resize = () => plot.setSize({ width: width(), height: HEIGHT });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [series]);
  return (
    <figure class="chart">
      <div ref={box} aria-hidden="true" data-testid="chart" />
      {series.skills.length > 0 && <ChartLegend series={series} />}
      <ChartSummary series={series} />
    </figure>
  );
}

/** Stacked bars: each skill's bar from zero to the running total, the later (lower) ones on top. */
function stackedData(series: SkillSeries): { data: uPlot.AlignedData; largest: number } {
  const running = series.days.map(() => 0);
  const stacked = series.skills.map((skill) =>
    skill.amounts.map((amount, i) => {
      // For the plot only (it takes floats); every amount shown as text stays exact.
      running[i]! += Number(amount) / 1_000_000;
      return running[i]!;
    }),
  );
  return {
    data: [series.days, ...[...stacked].reverse()] as uPlot.AlignedData,
    largest: Math.max(0, ...running),
  };
}

/** The axes (days in UTC, USDC up to a round top above the largest day) and one bar series per skill. */
function plotOptions(series: SkillSeries, largest: number, width: number): uPlot.Options {
  const first = series.days[0] ?? 0;
  const last = series.days[series.days.length - 1] ?? 0;
  return {
    width,
    height: HEIGHT,
    legend: { show: false },
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: {
      x: { time: true, range: () => [first - DAY_S / 2, last + DAY_S / 2] },
      y: { range: () => [0, axisTop(largest)] },
    },
    axes: [
      {
        label: 'Day (UTC)',
        labelSize: 20,
        // "24 Nov", read in UTC like the buckets (not the browser's zone or US month/day order).
        values: (_u, ticks) => ticks.map((t) => dayLabel(new Date(t * 1000)).slice(0, -5)),
      },
      {
        label: 'USDC',
        labelSize: 20,
        size: 70,
        values: (_u, ticks) => {
          const step = ticks.length > 1 ? ticks[1]! - ticks[0]! : 1;
          return ticks.map((t) => tickLabel(t, step));
        },
      },
    ],
    series: [
      {},
      ...series.skills
        .map((skill, i) => ({
          label: skill.name,
          stroke: COLOURS[i % COLOURS.length]!,
          fill: COLOURS[i % COLOURS.length]!,
          paths: uPlot.paths.bars?.({ size: [0.7, 40] }),
          points: { show: false },
        }))
        .reverse(),
    ],
  };
}

function ChartLegend(props: { series: SkillSeries }) {
  return (
    <ul class="legend" aria-label="Skills in the chart">
      {props.series.skills.map((skill, i) => (
        <li key={skill.name}>
          <span class={`swatch swatch-${i % COLOURS.length}`} aria-hidden="true" />
          {skill.name}: {usd(formatUsdc(skill.amounts.reduce((a, b) => a + b, 0n)))}
        </li>
      ))}
    </ul>
  );
}

/** The chart in words: how many payments, how much, and the busiest day. */
function ChartSummary(props: { series: SkillSeries }) {
  const { series } = props;
  const total = series.totals.reduce((a, b) => a + b, 0n);
  const count = series.counts.reduce((a, b) => a + b, 0);
  const busiest = series.totals.reduce((best, amount, i) => (amount > series.totals[best]! ? i : best), 0);
  return (
    <figcaption data-testid="chart-summary">
      Payments per day (UTC), last {series.days.length} days: {count} payment{count === 1 ? '' : 's'},{' '}
      {usd(formatUsdc(total))} in total
      {count > 0 &&
        `; busiest day ${dayLabel(new Date(series.days[busiest]! * 1000))} with ${usd(formatUsdc(series.totals[busiest]!))}`}
      .
    </figcaption>
  );
}
