import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef } from 'preact/hooks';

export interface ChartSeries {
  label: string;
  stroke: string;
  /** Values against the x axis (Unix seconds); null: no value there. */
  values: (number | null)[];
}

/**
 * A time series chart (uPlot) of `series` against `times` (Unix seconds), redrawn with the data in place. uPlot sizes
 * its elements through the CSSOM, which the dashboard's Content-Security-Policy allows, and adds no `<style>`.
 */
export function LineChart({
  name,
  title,
  times,
  series,
  yRange,
}: {
  name: string;
  title: string;
  times: number[];
  series: ChartSeries[];
  /** The y axis from 0 to this (e.g. a limit); default: from the data. */
  yRange?: number | null;
}) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label).join('|');

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      title,
      width: Math.max(el.clientWidth, 300),
      height: 180,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: false }))],
      scales: { y: { range: (_u, min, max) => [0, Math.max(yRange ?? max, min, 1)] } },
      axes: [{}, { size: 60 }],
    };
    const made = new uPlot(opts, [times, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    chart.current = made;
    const resize = new ResizeObserver(() => made.setSize({ width: Math.max(el.clientWidth, 300), height: 180 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      made.destroy();
      chart.current = null;
    };
  }, [shape, title, yRange]);

  useEffect(() => {
    chart.current?.setData([times, ...series.map((s) => s.values)] as uPlot.AlignedData);
  }, [times, series]);

  return <div class="chart" data-chart={name} ref={box} />;
}
