// The public surface of @sandgate/storage. fd-path.ts and remove-tree.ts stay internal: they hand out raw fds.
export * from './user-path.ts';
export * from './open-inside.ts';
export * from './write-inside.ts';
export * from './remove-inside.ts';
export * from './walk-tree.ts';
export * from './sha256-inside.ts';
export * from './mime.ts';
export * from './url-signer.ts';
export * from './workspaces.ts';
export * from './disk-quota.ts';
export * from './session-copies.ts';
export * from './btrfs.ts';
export * from './volumes.ts';
