import { callOutcomeLabel } from './transactions';
import type { Transaction } from './types';

/** A payment whose seller failed the call says so beside its status, in words (not by colour alone). */
export function CallNote(props: { transaction: Transaction; now: Date }) {
  const label = callOutcomeLabel(props.transaction, props.now);
  if (!label) return null;
  const open = props.transaction.callStatus !== 'served';
  return (
    <span class={`call-note ${open ? 'bad' : 'neutral'}`} data-testid="call-note">
      {label}
    </span>
  );
}
