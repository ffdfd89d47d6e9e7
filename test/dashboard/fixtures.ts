/** The marketing CSV and the pandas + seaborn + reportlab analysis of the reference workflow, as a person runs it. */
export const CSV =
  [
    'date,channel,spend,clicks,conversions',
    ...Array.from({ length: 60 }, (_, i) => {
      const channel = ['search', 'social', 'email', 'display'][i % 4]!;
      const date = `2026-0${1 + (i % 9)}-${String(1 + (i % 28)).padStart(2, '0')}`;
      return `${date},${channel},${(100 + i * 7.5).toFixed(2)},${200 + i * 13},${5 + (i % 11)}`;
    }),
  ].join('\n') + '\n';

/** Prints a first line, pauses (so the page shows it while the run is still going), then makes a chart and a PDF. */
export const ANALYSIS = `import time
import pandas as pd
df = pd.read_csv('marketing.csv')
print(f'rows loaded: {len(df)}', flush=True)
time.sleep(2)
import seaborn as sns, matplotlib.pyplot as plt
from reportlab.pdfgen import canvas
summary = df.groupby('channel')[['spend', 'conversions']].sum()
summary['cpa'] = summary['spend'] / summary['conversions']
ax = sns.barplot(x=summary.index, y=summary['cpa'])
ax.set_title('Cost per acquisition')
plt.savefig('cpa.png', dpi=80)
c = canvas.Canvas('report.pdf')
c.drawString(72, 800, 'Marketing report')
c.save()
print('\\x1b[32mdone\\x1b[0m')
print(summary.round(2).to_string())
`;
