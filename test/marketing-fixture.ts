/** The reference workflow's input and analysis, shared by the REST and MCP end-to-end tests. */

export const CSV =
  [
    'date,channel,spend,clicks,conversions',
    ...Array.from({ length: 60 }, (_, i) => {
      const channel = ['search', 'social', 'email', 'display'][i % 4]!;
      const date = `2026-0${1 + (i % 9)}-${String(1 + (i % 28)).padStart(2, '0')}`;
      return `${date},${channel},${(100 + i * 7.5).toFixed(2)},${200 + i * 13},${5 + (i % 11)}`;
    }),
  ].join('\n') + '\n';

export const ANALYSIS = `
import pandas as pd, seaborn as sns, matplotlib.pyplot as plt
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas
df = pd.read_csv('marketing.csv')
summary = df.groupby('channel')[['spend', 'conversions']].sum()
summary['cpa'] = summary['spend'] / summary['conversions']
ax = sns.barplot(x=summary.index, y=summary['cpa'])
ax.set_title('Cost per acquisition')
plt.savefig('cpa.png', dpi=80)
c = canvas.Canvas('report.pdf', pagesize=A4)
c.drawString(72, 800, 'Marketing report')
for i, (channel, row) in enumerate(summary.iterrows()):
    c.drawString(72, 770 - 18 * i, f'{channel}: CPA {row.cpa:.2f}')
c.save()
print(summary.round(2).to_string())
`;
