// The linter CI runs (npm run lint): ESLint's and typescript-eslint's recommended rules. Formatting is Prettier's
// (npm run format); lines stay within 120 columns, strings and test names aside.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**', '.cache/**', '**/dist/**', 'libs/client/src/generated/**', 'apps/dashboard/web/dist/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Tests and benches read JSON answers loosely on purpose: what they check is asserted, not typed.
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.{ts,tsx}'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'max-len': ['error', {
        code: 120, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true,
        ignorePattern: '^\\s*(test|it|describe|await t\\.test)\\(',
      }],
    },
  },
);
