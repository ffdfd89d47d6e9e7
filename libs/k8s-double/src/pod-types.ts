/** The parts of the core/v1 Pod the double reads, typed loosely: the schema check has already run. */
export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: { name: string; value?: string; valueFrom?: EnvSource }[];
  resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
  securityContext?: SecurityContext;
  imagePullPolicy?: string;
  terminationMessagePath?: string;
  terminationMessagePolicy?: string;
  ports?: { containerPort: number; protocol?: string }[];
}

export interface EnvSource {
  secretKeyRef?: { name: string; key: string; optional?: boolean };
  fieldRef?: { fieldPath: string };
}

export interface SecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  readOnlyRootFilesystem?: boolean;
  allowPrivilegeEscalation?: boolean;
  privileged?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type: string; localhostProfile?: string };
  fsGroup?: number;
  supplementalGroups?: number[];
}

export interface Volume {
  name: string;
  emptyDir?: { medium?: string; sizeLimit?: string | number };
  secret?: {
    secretName?: string;
    items?: { key: string; path: string; mode?: number }[];
    defaultMode?: number;
    optional?: boolean;
  };
  [source: string]: unknown;
}

export interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  volumes?: Volume[];
  restartPolicy?: string;
  activeDeadlineSeconds?: number;
  terminationGracePeriodSeconds?: number;
  runtimeClassName?: string;
  securityContext?: SecurityContext;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  serviceAccountName?: string;
  serviceAccount?: string;
  nodeName?: string;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  dnsPolicy?: string;
  schedulerName?: string;
  priority?: number;
  [field: string]: unknown;
}

export type ContainerState =
  | { waiting: { reason: string; message?: string } }
  | { running: { startedAt: string } }
  | {
      terminated: {
        exitCode: number;
        reason: string;
        message?: string;
        startedAt?: string;
        finishedAt?: string;
        containerID?: string;
      };
    };
