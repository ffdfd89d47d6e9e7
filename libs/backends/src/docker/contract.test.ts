import { describeBackendContract } from '../testing/contract.ts';
import { fixture, SANDBOX_UID } from '../testing/docker.ts';

describeBackendContract('docker', async (t) => {
  // A warm pool of one: the contract's one-shots go through both the pool and the cold path.
  const f = await fixture(t, { poolSize: 1 });
  return { backend: f.backend, workspaces: f.workspaces, fileOwner: { uid: SANDBOX_UID, gid: SANDBOX_UID } };
});
