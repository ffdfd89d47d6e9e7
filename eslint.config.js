// The linter CI runs (npm run lint): ESLint's and typescript-eslint's recommended rules. Formatting is Prettier's
// (npm run format); lines stay within 120 columns, strings and test names aside.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Test support: the Kubernetes API double, and the `testing` export of any workspace. */
const TEST_SUPPORT = /^@sandgate\/(k8s-double(\/.*)?|[a-z0-9-]+\/testing)$/;
const TEST_SUPPORT_WHY = "test support (the Kubernetes API double, a package's testing export) is for tests only";
/** One way to keep a member to its class: ECMAScript's `#name`, which holds at run time too (constructors aside). */
const NO_TS_PRIVATE = {
  selector:
    ':matches(PropertyDefinition, MethodDefinition[kind!="constructor"], TSParameterProperty, ' +
    'TSAbstractPropertyDefinition, TSAbstractMethodDefinition)[accessibility="private"]',
  message: 'a private member is written #name, not `private name`',
};

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '.cache/**',
      '**/dist/**',
      'libs/client/src/generated/**',
      'apps/dashboard/web/dist/**',
      'apps/dashboard/build/**',
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
    rules: { 'no-restricted-syntax': ['error', NO_TS_PRIVATE] },
  },
  {
    // Product code never imports test support: the Kubernetes API double, nor any package's `testing` export. Tests,
    // test support and the double itself may.
    files: ['apps/*/src/**/*.{ts,tsx}', 'libs/*/src/**/*.{ts,tsx}'],
    ignores: ['libs/k8s-double/**', '**/*.test.ts', '**/testing.ts', '**/testing/**'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: TEST_SUPPORT.source, message: TEST_SUPPORT_WHY }] }],
      'no-restricted-syntax': [
        'error',
        NO_TS_PRIVATE,
        { selector: `ImportExpression[source.value=${TEST_SUPPORT}]`, message: TEST_SUPPORT_WHY },
      ],
    },
  },
  {
    files: ['**/*.{ts,tsx}'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'max-len': [
        'error',
        {
          code: 120,
          ignoreStrings: true,
          ignoreTemplateLiterals: true,
          ignoreRegExpLiterals: true,
          ignoreUrls: true,
          ignorePattern: '^\\s*(test|it|describe|await t\\.test)\\(',
        },
      ],
    },
  },
);
