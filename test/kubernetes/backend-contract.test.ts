import { describeBackendContract } from '@sandgate/backends/testing';
import { startStack } from '../harness.ts';
import { kubernetesBackendOf } from './backend-of.ts';

describeBackendContract('kubernetes', async (t) => {
  // The stack gives the Pods their gateway (files) and the backend its Redis (transfer grants).
  const s = await startStack({ backend: 'kubernetes', worker: false });
  t.after(() => s.close());
  // Pods reach a session's files only while the session exists.
  const session = await s.deps.sessions.create('contract', { ttlSeconds: 3600, maxSessions: 10 });
  return {
    session: { id: session.id, tenant: 'contract' },
    backend: kubernetesBackendOf(s, t),
    workspaces: s.deps.workspaces,
    fileOwner: { uid: s.config.sandboxUid, gid: s.config.sandboxUid },
  };
});
