/** What the DBBench integration tests share: where the server and the dev split are, and admin-side checks. */
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import { DEFAULT_DBBENCH_MYSQL_URL } from '../../core/envs/dbbench/mysql-server';
import type { AdminQueryable } from '../../core/envs/dbbench/sandbox-admin';

export const DBBENCH_TEST_URL = process.env.DBBENCH_MYSQL_URL || DEFAULT_DBBENCH_MYSQL_URL;
export const DEV_SPLIT = path.resolve(__dirname, '../../data/dbbench/dev.jsonl');

export async function databaseExists(admin: AdminQueryable, name: string): Promise<boolean> {
  const [rows] = await admin.query<RowDataPacket[]>('SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [name]);
  return rows.length > 0;
}

export async function userExists(admin: AdminQueryable, name: string): Promise<boolean> {
  const [rows] = await admin.query<RowDataPacket[]>('SELECT 1 FROM mysql.user WHERE User = ?', [name]);
  return rows.length > 0;
}

/** A leftover as a dead worker leaves it: database and user, named as created at `createdAt`. */
export async function makeLeftover(admin: AdminQueryable, prefix: string, createdAt: number): Promise<string> {
  const name = `${prefix}${createdAt}_${Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, '0')}`;
  await admin.query(`CREATE DATABASE \`${name}\``);
  await admin.query(`CREATE USER ?@'%' IDENTIFIED BY 'x'`, [name]);
  return name;
}

/** Waits until `user` has no sessions left on the server (a closed session lingers a moment). */
export async function waitForNoSessions(admin: AdminQueryable, user: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [rows] = await admin.query<RowDataPacket[]>('SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = ?', [user]);
    if (rows.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${user} still has ${rows.length} session(s) after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
