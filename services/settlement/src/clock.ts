/** Business time (settlement periods, completedAt). Injected so tests move days without sleeping. */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();
