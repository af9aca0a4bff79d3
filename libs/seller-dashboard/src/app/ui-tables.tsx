import type { ComponentChildren } from 'preact';

/** A table that scrolls sideways; `focusable` when no cell holds a link or button (a keyboard must scroll it). */
export function ScrollTable(props: {
  label: string;
  caption?: string;
  columns: string[];
  class?: string;
  testId?: string;
  focusable?: boolean;
  children: ComponentChildren;
}) {
  return (
    <section
      class="table-wrap"
      aria-label={`${props.label} (scrolls sideways)`}
      tabIndex={props.focusable ? 0 : undefined}
    >
      <table class={props.class} data-testid={props.testId}>
        <caption class="visually-hidden">{props.caption ?? props.label}</caption>
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th key={column} scope="col">
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </section>
  );
}
