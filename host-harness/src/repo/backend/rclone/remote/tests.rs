//! Hostile connection strings: every option value hidden, whatever its key,
//! however it is quoted, and wherever rclone prints it.

use super::*;

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn parses_as_rclone_does() {
    let opt = |key, value| Opt { key, value };
    assert_eq!(parse("/srv/repo"), Ok(Parsed::Local));
    assert_eq!(parse("/srv/a,b=c:d"), Ok(Parsed::Local));
    assert_eq!(parse("dir/x:y"), Ok(Parsed::Local));
    assert_eq!(
        parse("remote:path/to:x"),
        Ok(Parsed::Remote {
            name: "remote",
            options: vec![],
            path: "path/to:x"
        })
    );
    assert_eq!(
        parse(":s3,env_auth,region=eu,pass='a,b:c''d',k=\"x\":bucket/r"),
        Ok(Parsed::Remote {
            name: ":s3",
            options: vec![
                opt("env_auth", None),
                opt("region", Some(("eu", None))),
                opt("pass", Some(("'a,b:c''d'", Some('\'')))),
                opt("k", Some(("\"x\"", Some('"')))),
            ],
            path: "bucket/r"
        })
    );
    // A quote inside an unquoted value is a character like any other.
    assert_eq!(
        parse(":sftp,user=o'neil:r"),
        Ok(Parsed::Remote {
            name: ":sftp",
            options: vec![opt("user", Some(("o'neil", None)))],
            path: "r"
        })
    );
    for (bad, why) in [
        (":s3,pass='unclosed,region=x:b", Unreadable::Unclosed),
        (":s3,pass='a'b:c", Unreadable::AfterQuote),
        (":s3,pass='a'", Unreadable::AfterQuote),
        (":s3,pass=x", Unreadable::NoPath),
        (":s3,pa-ss=x:b", Unreadable::Key),
        (":s3,=x:b", Unreadable::Key),
        ("::path", Unreadable::Name),
        (":/x:y", Unreadable::Name),
        ("a=b,c:d", Unreadable::Name),
        (":s3", Unreadable::NoPath),
    ] {
        assert_eq!(parse(bad), Err(why), "{bad}");
    }
}

/// The shown form keeps the remote's name or type, the keys and the path,
/// and hides every value: `headers` (which no list of secret names had),
/// double-quoted values holding `:` (a SAS URL's `sig=`) and `,`, doubled
/// quotes, and the overrides of a named remote.
#[test]
fn every_option_value_is_hidden_in_the_shown_form() {
    for (remote, expected) in [
        (
            ":http,headers=\"Authorization,Bearer S1\":path",
            ":http,headers=***:path",
        ),
        (
            ":http,headers='Authorization,Bearer S2':path",
            ":http,headers=***:path",
        ),
        (
            ":azureblob,account=acct,sas_url=\"https://a.blob.core.windows.net/c?sv=1&sig=S3\":c/r",
            ":azureblob,account=***,sas_url=***:c/r",
        ),
        (
            ":sftp,user=me,pass=\"S4\"\"S4:x,y\",port=22:r",
            ":sftp,user=***,pass=***,port=***:r",
        ),
        (
            "store,headers='X-Key,S5',links,description=S6:bucket/repo",
            "store,headers=***,links,description=***:bucket/repo",
        ),
        (
            ":gcs,service_account_credentials='{\"private_key\":\"S7\"}':b/r",
            ":gcs,service_account_credentials=***:b/r",
        ),
        ("remote:path", "remote:path"),
        (":local:/srv/repo", ":local:/srv/repo"),
        ("/srv/repo", "/srv/repo"),
        (":webdav,url=https://u:S8@h/x:y", ":webdav,url=***:***"),
        (":s3,pass='unclosed-S9,region=x:b", "***"),
        ("pass=S10,x:b", "***"),
    ] {
        assert_eq!(shown(remote), expected, "{remote}");
        assert_eq!(
            redact_location(&format!("rclone:{remote}")),
            format!("rclone:{expected}")
        );
    }
}

/// rclone prints the remote as written, or inside Go's `%q` (quotes
/// escaped), and a backend may print one value, unquoted, or part of one.
#[test]
fn the_scrubber_hides_every_value_wherever_rclone_prints_it() {
    let remote = ":crypt,remote=/srv/store,headers='Authorization,Bearer HDR-TOKEN-1',\
                  password=\"PW-SECRET:a,b\"\"c\",sas_url=\"https://h/c?sv=1&sig=SIGSECRET123\":repo";
    let scrubber = Scrubber::new(remote, &[]);
    let quoted = go_escaped(remote);
    for line in [
        format!("Failed to create file system for \"{quoted}\": is it obscured?"),
        format!("Creating backend with remote {remote}"),
        "header Authorization: Bearer HDR-TOKEN-1".to_owned(),
        "password PW-SECRET:a,b\"c rejected".to_owned(),
        "password \"PW-SECRET:a,b\"\"c\" rejected".to_owned(),
        "GET https://h/c?comp=list&sig=SIGSECRET123&sv=1: refused".to_owned(),
    ] {
        let scrubbed = scrubber.scrub(&line);
        for secret in ["HDR-TOKEN-1", "PW-SECRET", "SIGSECRET123", "b\"c"] {
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
    }
    let scrubbed = scrubber.scrub(&format!("for \"{quoted}\": bad"));
    assert_eq!(
        scrubbed,
        "for \":crypt,remote=***,headers=***,password=***,sas_url=***:repo\": bad"
    );
}

#[test]
fn the_scrubber_hides_the_values_of_rclones_arguments() {
    let scrubber = Scrubber::new(
        ":local:/srv/r",
        &words(
            "rclone --config /etc/rclone-CONF serve restic --stdio --b2-hard-delete \
             --s3-secret-access-key=ARG-SECRET-1 --http-headers Authorization,ARG-SECRET-2 -vv",
        ),
    );
    let line = "starting with [\"--config\" \"/etc/rclone-CONF\" \
                \"--s3-secret-access-key=ARG-SECRET-1\" \"--http-headers\" \
                \"Authorization,ARG-SECRET-2\" \"serve\" \"restic\" \"--stdio\"]";
    let scrubbed = scrubber.scrub(line);
    for secret in ["ARG-SECRET", "rclone-CONF"] {
        assert!(!scrubbed.contains(secret), "{scrubbed}");
    }
    for kept in [
        "--s3-secret-access-key=***",
        "\"serve\" \"restic\" \"--stdio\"",
    ] {
        assert!(scrubbed.contains(kept), "{kept}: {scrubbed}");
    }
    assert_eq!(
        argument_values(&words("serve restic --stdio --b2-hard-delete")),
        Vec::<String>::new()
    );
}

#[test]
fn one_character_values_are_left_and_a_plain_remote_stays_readable() {
    let scrubber = Scrubber::new(":s3,v=1,region=eu:bucket/repo", &[]);
    assert_eq!(
        scrubber.scrub("error 1 in eu region for :s3,v=1,region=eu:bucket/repo"),
        "error 1 in *** region for :s3,v=***,region=***:bucket/repo"
    );
    let plain = Scrubber::new("remote:bucket/repo", &[]);
    assert_eq!(
        plain.scrub("didn't find section in config file (remote:bucket/repo)"),
        "didn't find section in config file (remote:bucket/repo)"
    );
}

/// An unreadable remote never reaches rclone (the scheme refuses it), but
/// its scrubber still hides it whole, and its long parts.
#[test]
fn an_unreadable_remote_is_hidden_whole() {
    let remote = ":s3,pass='unclosed-SECRET-1,region=x:b";
    let scrubber = Scrubber::new(remote, &[]);
    let scrubbed = scrubber.scrub(&format!("bad remote {remote}; unclosed-SECRET-1"));
    assert!(!scrubbed.contains("SECRET"), "{scrubbed}");
    assert!(check(remote).is_err());
}

/// An unquoted value ends at the first `:` (rclone's grammar), so the rest
/// of a URL and every option after it become the path: that path is
/// hidden, in the shown form and in what rclone prints.
#[test]
fn a_path_that_continues_an_unquoted_value_is_hidden() {
    for (remote, shown_as) in [
        (
            ":s3,provider=Minio,endpoint=http://127.0.0.1:9000,access_key_id=AKID,secret_access_key=S3CRETKEY:bucket/repo",
            ":s3,provider=***,endpoint=***:***",
        ),
        (
            ":azureblob,sas_url=https://acct.blob.example/c?sv=1&sig=SIGSECRET:repo",
            ":azureblob,sas_url=***:***",
        ),
        (
            ":http,url=http://h:80,headers=\"Authorization,Bearer T0KENSECRET\":p",
            ":http,url=***:***",
        ),
    ] {
        assert_eq!(shown(remote), shown_as, "{remote}");
        let scrubber = Scrubber::new(remote, &[]);
        let Ok(Parsed::Remote { path, .. }) = parse(remote) else {
            panic!("{remote} parses");
        };
        let line = scrubber.scrub(&format!("directory not found: {path}"));
        for secret in ["S3CRETKEY", "SIGSECRET", "T0KENSECRET", "AKID"] {
            assert!(!line.contains(secret), "{line}");
        }
    }
    // A quoted URL keeps the path readable, and so does a plain one.
    assert_eq!(
        shown(":s3,endpoint='http://h:9000',secret_access_key=K:bucket/repo"),
        ":s3,endpoint=***,secret_access_key=***:bucket/repo"
    );
    assert_eq!(
        shown("remote,region=eu:bucket/repo"),
        "remote,region=***:bucket/repo"
    );
}
