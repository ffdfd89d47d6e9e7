import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Api } from './api.ts';

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside <ApiContext.Provider>');
  return api;
}
