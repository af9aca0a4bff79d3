/** Styles scoped by the `pgc-` prefix; the dialog fits a 320 px wide phone. */
export const STYLES = `
.pgc-button{font:600 16px/1.2 system-ui,sans-serif;padding:12px 20px;border-radius:8px;border:0;background:#1652f0;color:#fff;cursor:pointer;min-height:44px}
.pgc-button:focus-visible,.pgc-dialog button:focus-visible{outline:3px solid #ffbf47;outline-offset:2px}
.pgc-backdrop{position:fixed;inset:0;background:rgba(0,0,0,.55);display:flex;align-items:center;justify-content:center;z-index:2147483000;padding:8px}
.pgc-dialog{background:#fff;color:#111;font:15px/1.45 system-ui,sans-serif;border-radius:12px;width:min(420px,100%);max-height:calc(100vh - 16px);overflow:auto;padding:20px;box-sizing:border-box;box-shadow:0 10px 40px rgba(0,0,0,.3)}
.pgc-dialog p{overflow-wrap:anywhere}
.pgc-dialog h2{font-size:19px;margin:0 0 4px}
.pgc-dialog .pgc-desc{color:#444;margin:0 0 12px;word-break:break-word}
.pgc-qr{display:flex;justify-content:center;margin:8px 0}
.pgc-qr svg{width:min(220px,70vw);height:auto}
.pgc-field{margin:10px 0}
.pgc-field dt{font-size:13px;color:#555}
.pgc-field dd{margin:2px 0 0;display:flex;gap:8px;align-items:center}
.pgc-value{font:600 15px/1.3 ui-monospace,monospace;word-break:break-all;flex:1}
.pgc-dialog button{font:600 15px/1.2 system-ui,sans-serif;border-radius:8px;min-height:44px;padding:8px 14px;cursor:pointer;border:1px solid #1652f0;background:#fff;color:#1652f0}
.pgc-dialog button.pgc-primary{background:#1652f0;color:#fff;width:100%;margin-top:8px}
.pgc-dialog .pgc-close{float:right;border:0;font-size:22px;min-width:44px;padding:4px}
.pgc-timer{font-weight:600}
.pgc-status{margin:12px 0 0;padding:10px;border-radius:8px;background:#f2f4f8}
.pgc-status[data-state=success]{background:#e3f6e8;color:#0b5a23}
.pgc-status[data-state=expired],.pgc-status[data-state=error]{background:#fdecea;color:#8a1c12}
.pgc-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`;
