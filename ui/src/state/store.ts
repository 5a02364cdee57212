// A minimal observable store: one immutable state object, replaced by
// `update`, with listeners told after each change. The UI subscribes through
// the `useAppState` hook (src/components/context.ts); state logic and its tests
// use it directly, without any UI library.

export type Listener = () => void;

export class Store<S> {
  private listeners = new Set<Listener>();

  constructor(private state: S) {}

  get(): S {
    return this.state;
  }

  /** Replace part of the state (shallow merge) or compute it from the current one. */
  update(change: Partial<S> | ((state: S) => Partial<S>)): void {
    const patch = typeof change === "function" ? change(this.state) : change;
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener();
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
