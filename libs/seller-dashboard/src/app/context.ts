import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { ApiClient } from './api';
import type { Session } from './session';

interface DashboardContext {
  api: ApiClient;
  session: Session;
  signOut: (reason?: string) => void;
}

export const Dashboard = createContext<DashboardContext | undefined>(undefined);

export function useDashboard(): DashboardContext {
  const value = useContext(Dashboard);
  if (!value) throw new Error('useDashboard outside the signed-in dashboard');
  return value;
}
