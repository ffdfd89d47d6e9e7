import { ANALYSIS as REFERENCE_ANALYSIS, CSV } from '../marketing-fixture.ts';

export { CSV };

/**
 * The reference analysis as a person watches it run: a first line, a pause (so the page shows it while
 * the run is still going), the chart and the PDF report, then a line in ANSI green.
 */
export const ANALYSIS = `import time
import pandas as pd
print(f"rows loaded: {len(pd.read_csv('marketing.csv'))}", flush=True)
time.sleep(2)
${REFERENCE_ANALYSIS}print('\\x1b[32mdone\\x1b[0m')
`;
