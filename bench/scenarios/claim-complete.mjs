// bench/claim-complete.mjs as a scenario: Tock's store loop and Worker on a ready backlog.
import { scriptScenario } from '../script-scenario.mjs';

export default scriptScenario({
  name: 'claim-complete',
  script: 'claim-complete.mjs',
  description: 'Tock alone: one claimRuns → completeRuns loop, and the Worker (bench/claim-complete.mjs)',
});
