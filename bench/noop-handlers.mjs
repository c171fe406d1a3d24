// The handlers module (`tock worker --handlers`) of the worker processes the http scenario
// starts: `noop` does nothing; `stamp` returns the instant it started (epoch ms on this process's
// clock, fractional), kept as the run's output, so that a start delay can be measured without the
// worker's own account of it.
export default {
  noop: () => {},
  stamp: () => String(performance.timeOrigin + performance.now()),
};
