// The page's words in English and Japanese; the choice is kept in this browser.

const WORDS = {
  en: {
    console: "console", tab_queue: "Queue", tab_demo: "Demo: where a cancel goes",
    connecting: "connecting…", live: "live", reconnecting: "reconnecting…",
    needs_token: "this console needs its token", token: "Token",
    engine: "Engine", waiting: "Waiting", tokens_per_s: "Tokens/s", kb: "Knowledge base",
    rescrape: "Rescrape", answering: "Answering now", queue: "Queue",
    platform: "platform", asker: "asker", question: "question", waited: "waited",
    queue_empty: "Nobody is waiting.", outcomes: "Last outcomes", time: "time",
    outcome: "outcome", tokens: "tokens", took: "took", stop: "Stop",
    idle: "idle", answering_now: "answering", rescraping: "rescraping", not_seen: "not seen",
    workers: "worker(s) taking requests", no_health: "no /healthz answer",
    up_for: "up for", before_console: "queued before the console started",
    listed: "listed", now: "now", recent: "median of recent answers",
    articles: "articles", passages: "passages", last_rescrape: "last rescrape",
    next_rescrape: "next scheduled rescrape",
    never: "never", local_file: "local file", no_kb: "no knowledge base file yet",
    nothing_running: "Nothing is being answered.", stop_asked: "stop asked by",
    stop_sent: "stop sent", rescrape_sent: "rescrape asked",
    refused: "refused", running_for: "running for", waited_for: "waited",
    done: "done", stopped: "stopped", expired: "expired", failed: "failed",
    depth: "Requests queued behind the answer", ask: "Ask", cancel: "Cancel",
    pane_a: "A: cancel into the request queue", pane_b: "B: cancel on its own queue",
    chart_title: "concierge bench cancel: time to stop",
    phase_idle: "Press Ask.", phase_starting: "starting this pane's engine…",
    phase_asking: "asking…", phase_streaming: "answering", phase_ended: "ended",
    behind: "queued behind", cancel_sent_after: "cancel sent after",
    took_effect: "took effect", later: "later", cancel_mark: "cancel sent", tokens_after: "tokens after the cancel",
    ran_to_end: "ran to its end", engine_reached: "the engine reached the cancel",
    never_reached: "the engine never reached the cancel",
    finished_no_cancel: "finished; no cancel was sent",
    stop_median: "stop time, median (s, log scale)", your_run: "your run",
    source: "source", broker_count: "the broker counts", per_s: "tokens/s",
    by_space: "by space", unknown_space: "space unknown", spaces: "spaces",
    demo_text:
      "Both panes ask the same question, each of an engine of its own, with the chosen " +
      "number of requests queued behind it, and send a cancel when you press Cancel. " +
      "In A the cancel is put into the request queue, as a design with one queue would: " +
      "the engine takes one request at a time, so it reaches the cancel only after the " +
      "running answer and every request queued before the cancel, and the answer runs to " +
      "its end. In B the cancel goes on its own exchange and queue, which the engine reads " +
      "while it generates: the answer stops within milliseconds, with no token after the " +
      "cancel, however long the queue. The chart shows the latest concierge bench cancel " +
      "results: the time from cancel to stop against the queue's depth.",
  },
  ja: {
    console: "コンソール", tab_queue: "キュー", tab_demo: "デモ：キャンセルの行き先",
    connecting: "接続中…", live: "ライブ", reconnecting: "再接続中…",
    needs_token: "このコンソールにはトークンが必要です", token: "トークン",
    engine: "エンジン", waiting: "待機中", tokens_per_s: "トークン/秒", kb: "ナレッジベース",
    rescrape: "再スクレイプ", answering: "回答中", queue: "キュー",
    platform: "プラットフォーム", asker: "質問者", question: "質問", waited: "待ち時間",
    queue_empty: "待っている人はいません。", outcomes: "最近の結果", time: "時刻",
    outcome: "結果", tokens: "トークン", took: "所要", stop: "停止",
    idle: "待機", answering_now: "回答中", rescraping: "再スクレイプ中", not_seen: "見えません",
    workers: "件のワーカーがリクエストを処理", no_health: "/healthz の応答なし",
    up_for: "稼働", before_console: "件はコンソール起動前から待機",
    listed: "件を表示", now: "現在", recent: "最近の回答の中央値",
    articles: "記事", passages: "パッセージ", last_rescrape: "最終スクレイプ",
    next_rescrape: "次回の定期スクレイプ",
    never: "なし", local_file: "ローカルファイル", no_kb: "ナレッジベースのファイルはまだありません",
    nothing_running: "回答中のものはありません。", stop_asked: "停止を要求：",
    stop_sent: "停止を送信しました", rescrape_sent: "再スクレイプを依頼しました",
    refused: "拒否されました", running_for: "経過", waited_for: "待ち時間",
    done: "完了", stopped: "停止", expired: "期限切れ", failed: "失敗",
    depth: "回答の後ろに並ぶリクエスト数", ask: "質問する", cancel: "キャンセル",
    pane_a: "A：キャンセルをリクエストキューへ", pane_b: "B：キャンセルを専用キューへ",
    chart_title: "concierge bench cancel：停止までの時間",
    phase_idle: "「質問する」を押してください。", phase_starting: "このペインのエンジンを起動中…",
    phase_asking: "質問中…", phase_streaming: "回答中", phase_ended: "終了",
    behind: "後ろで待機", cancel_sent_after: "キャンセル送信：",
    took_effect: "効いたのは", later: "後", cancel_mark: "キャンセル送信", tokens_after: "キャンセル後のトークン",
    ran_to_end: "最後まで生成されました", engine_reached: "エンジンがキャンセルに届いたのは",
    never_reached: "エンジンはキャンセルに届きませんでした",
    finished_no_cancel: "完了（キャンセルは送っていません）",
    stop_median: "停止までの時間・中央値（秒、対数）", your_run: "今回の実行",
    source: "出典", broker_count: "ブローカーの集計", per_s: "トークン/秒",
    by_space: "スペース別", unknown_space: "スペース不明", spaces: "スペース",
    demo_text:
      "どちらのペインも、それぞれ専用のエンジンに同じ質問を送り、選んだ数のリクエストを" +
      "その後ろに並べます。「キャンセル」を押すとキャンセルを送ります。A ではキャンセルを" +
      "リクエストキューに入れます（キューが一つしかない設計と同じです）。エンジンは" +
      "リクエストを一件ずつ処理するので、生成中の回答と、キャンセルより前に並んだすべての" +
      "リクエストを終えてから、ようやくキャンセルに届きます。回答は最後まで生成されます。" +
      "B ではキャンセルを専用のエクスチェンジとキューに送ります。エンジンは生成中もこの" +
      "キューを読んでいるので、キューがどれほど長くても回答は数ミリ秒で止まり、キャンセル後の" +
      "トークンは出ません。グラフは最新の concierge bench cancel の結果で、キャンセルから" +
      "停止までの時間をキューの深さごとに示します。",
  },
};

let lang = localStorage.getItem("concierge-console-lang") === "ja" ? "ja" : "en";

export function t(key) {
  return WORDS[lang][key] ?? WORDS.en[key] ?? key;
}

export function setLanguage(next) {
  lang = next === "ja" ? "ja" : "en";
  localStorage.setItem("concierge-console-lang", lang);
  applyLanguage();
}

export function applyLanguage() {
  document.documentElement.lang = lang;
  for (const element of document.querySelectorAll("[data-i18n]")) {
    element.textContent = t(element.dataset.i18n);
  }
  for (const button of document.querySelectorAll("[data-lang]")) {
    button.classList.toggle("chosen", button.dataset.lang === lang);
  }
}
