import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startNotifier } from './service';

void runMain('notifier', () => startNotifier(loadConfig()));
