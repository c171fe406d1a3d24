// bench/drivers.mjs as a scenario: the same claim and complete statements through pg and postgres.js.
import { scriptScenario } from '../script-scenario.mjs';

export default scriptScenario({
  name: 'drivers',
  script: 'drivers.mjs',
  description: 'node-postgres against postgres.js on Tock’s claim + complete loop (bench/drivers.mjs)',
});
