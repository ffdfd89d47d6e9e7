import { describeBackendContract } from '@sandgate/backends/contract';
import { kubernetesBackendOf, startStack } from '../harness.ts';

describeBackendContract('kubernetes (API double)', async (t) => {
  // The stack gives the Pods their gateway (files) and the backend its Redis (transfer grants).
  const s = await startStack({ backend: 'kubernetes', worker: false });
  t.after(() => s.close());
  return {
    backend: kubernetesBackendOf(s, t),
    workspaces: s.deps.workspaces,
    fileOwner: { uid: s.config.sandboxUid, gid: s.config.sandboxUid },
  };
});
