import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { formatUsdc } from '@paygate/money';
import type { DailySeries } from './transactions';
import { microToPlot } from './transactions';

/** Payments per day (bars) with a text summary for screen readers. */
export function PaymentsChart(props: { series: DailySeries }) {
  const box = useRef<HTMLDivElement>(null);
  const { series } = props;
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const width = () => Math.max(260, element.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.15)] } },
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => `$${t}`), size: 60 }],
        series: [
          {},
          {
            label: 'Payments (USDC)',
            stroke: '#1d6fa5',
            fill: 'rgba(29,111,165,0.35)',
            paths: uPlot.paths.bars?.({ size: [0.7, 40] }),
            points: { show: false },
          },
        ],
      },
      [series.days, series.amounts.map(microToPlot)],
      element,
    );
    const resize = () => plot.setSize({ width: width(), height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [series]);
  const total = series.amounts.reduce((a, b) => a + b, 0n);
  const count = series.counts.reduce((a, b) => a + b, 0);
  const busiest = series.amounts.reduce((best, amount, i) => (amount > series.amounts[best]! ? i : best), 0);
  return (
    <figure class="chart">
      <div ref={box} aria-hidden="true" />
      <figcaption>
        Payments per day, last {series.days.length} days: {count} payment{count === 1 ? '' : 's'}, $
        {formatUsdc(total)} in total
        {count > 0 &&
          `; busiest day ${new Date(series.days[busiest]! * 1000).toISOString().slice(0, 10)} with $${formatUsdc(
            series.amounts[busiest]!,
          )}`}
        .
      </figcaption>
    </figure>
  );
}
